import { systemPrompt } from '@dsh/driver-openai'
import type { SessionEvent } from '@dsh/session'
import type { SubagentDriver, SubagentRun, SubagentRunOutcome } from '@dsh/subagent'
import { type AgentTurnOptions, runAgentTurn } from './agent.js'
import { type AnthropicClient, type AnthropicClientOptions, createAnthropicClient } from './model.js'

export interface AnthropicDriverOptions extends AnthropicClientOptions {
  /** An existing client (shared with a top-level agent); otherwise one is made from the options. */
  readonly client?: AnthropicClient
  readonly maxSteps?: number
  /** A system prompt for every agent, before the child's persona and instructions. */
  readonly system?: string
  readonly notices?: AgentTurnOptions['notices']
  /** The `sessionContext` service the requests are built from, or a getter for it; without one the driver folds the unit itself. */
  readonly context?: AgentTurnOptions['context']
  /** The `compaction` service or a getter for it; with `contextWindow` every run's steps compact at the budget. */
  readonly compaction?: AgentTurnOptions['compaction']
  /** The model's context window in tokens: the budget trigger compacts at `contextWindow * compactAt`. */
  readonly contextWindow?: number
  /** The fraction of the window at which a step compacts first (default 0.8). */
  readonly compactAt?: number
  /** Where the bytes of images and PDFs stored beside a session come from (one reader per session). */
  readonly attachments?: AgentTurnOptions['attachments']
  /** Called after each event a run appends (the CLI prints progress from it). Must not append. */
  readonly onEvent?: (run: SubagentRun, event: SessionEvent) => void
  /** Written into descriptors as the default `provider` (default `anthropic`). */
  readonly name?: string
}

/**
 * A `SubagentDriver` over the Anthropic Messages API. Each run is one agent
 * turn over the agent's own context (`@dsh/session-context`), with the tools
 * the runtime gives the run (already narrowed by the child's `toolFilter`).
 * The run's settings supply the model (`model`, else `agentModel`) and the
 * system prompt (`persona`, `instructions`, and the `outputSchema` a
 * one-shot answer must satisfy). Interrupts end the turn `cancelled`, the
 * runtime's reason for it.
 */
export function createAnthropicDriver(options: AnthropicDriverOptions = {}): SubagentDriver {
  const client = options.client ?? createAnthropicClient(options)
  return Object.freeze({
    name: options.name ?? 'anthropic',
    // What its steps name in `step/start` when a child's settings name no model (a cost budget is priced by it).
    model: { provider: client.provider, model: client.model },
    run(run: SubagentRun): Promise<SubagentRunOutcome> {
      const settings = run.settings
      const model = settings?.model ?? settings?.agentModel
      const system = systemPrompt(options.system, settings)
      return runAgentTurn({
        client,
        session: run.session,
        turn: run.turn,
        tools: run.tools,
        signal: run.signal,
        abortReason: 'cancelled',
        ...(model === undefined ? {} : { model }),
        ...(system === undefined ? {} : { system }),
        ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
        ...(options.notices === undefined ? {} : { notices: options.notices }),
        ...(options.context === undefined ? {} : { context: options.context }),
        ...(options.compaction === undefined ? {} : { compaction: options.compaction }),
        ...(options.contextWindow === undefined ? {} : { contextWindow: options.contextWindow }),
        ...(options.compactAt === undefined ? {} : { compactAt: options.compactAt }),
        ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
        ...(options.onEvent === undefined ? {} : { onEvent: (event: SessionEvent) => options.onEvent?.(run, event) }),
      })
    },
  })
}
