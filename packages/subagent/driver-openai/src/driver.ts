import type { SessionEvent } from '@dsh/session'
import type { SubagentDriver, SubagentRun, SubagentRunOutcome, SubagentSettings } from '@dsh/subagent'
import { type AgentTurnOptions, runAgentTurn } from './agent.js'
import { createModelClient, type ModelClient, type ModelClientOptions } from './model.js'

export interface OpenAIDriverOptions extends ModelClientOptions {
  /** An existing client (shared with a top-level agent); otherwise one is made from the options. */
  readonly client?: ModelClient
  readonly maxSteps?: number
  /** A system prompt for every agent, before the child's persona and instructions. */
  readonly system?: string
  readonly notices?: AgentTurnOptions['notices']
  /**
   * The `sessionContext` service the requests are built from, or a getter for
   * it (the host that provides it is usually made after the driver); without
   * one the driver folds the same unit itself, kept per session.
   */
  readonly context?: AgentTurnOptions['context']
  /** Where attachment bytes come from, one reader per session (see `runAgentTurn`); without it an image is sent as a missing-attachment note. */
  readonly attachments?: AgentTurnOptions['attachments']
  /** The `compaction` service or a getter for it; with `contextWindow` every run's steps compact at the budget (see `runAgentTurn`). */
  readonly compaction?: AgentTurnOptions['compaction']
  /** The model's context window in tokens: the budget trigger compacts at `contextWindow * compactAt`. */
  readonly contextWindow?: number
  /** The fraction of the window at which a step compacts first (default 0.8). */
  readonly compactAt?: number
  /** Called after each event a run appends (the CLI prints progress from it). Must not append. */
  readonly onEvent?: (run: SubagentRun, event: SessionEvent) => void
  /** Written into descriptors as the default `provider` (default `openai`). */
  readonly name?: string
}

/**
 * A `SubagentDriver` over an OpenAI-compatible Chat Completions API. Each run
 * is one agent turn over the agent's own context (`@dsh/session-context`,
 * folded from its log: a fork child's starts with the prefix it inherited;
 * notices from its children are in it),
 * with the tools the runtime gives the run (already narrowed by the child's
 * `toolFilter`). The settings the runtime hands over supply the model
 * (`model`, else `agentModel`) and the system prompt (`persona`,
 * `instructions`, and the `outputSchema` a one-shot answer must satisfy).
 * Interrupts end the turn `cancelled`, the runtime's reason for it.
 */
export function createOpenAIDriver(options: OpenAIDriverOptions = {}): SubagentDriver {
  const client = options.client ?? createModelClient(options)
  return Object.freeze({
    name: options.name ?? 'openai',
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
        ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
        ...(options.compaction === undefined ? {} : { compaction: options.compaction }),
        ...(options.contextWindow === undefined ? {} : { contextWindow: options.contextWindow }),
        ...(options.compactAt === undefined ? {} : { compactAt: options.compactAt }),
        ...(options.onEvent === undefined ? {} : { onEvent: (event: SessionEvent) => options.onEvent?.(run, event) }),
      })
    },
  })
}

/** The system prompt of a run: the driver's own, then the child's persona, instructions and output contract. */
export function systemPrompt(base: string | undefined, settings: SubagentSettings | undefined): string | undefined {
  const parts = [base, settings?.persona, settings?.instructions]
  if (settings?.outputSchema !== undefined) {
    parts.push(
      `Your final answer must be a single JSON value (no prose, no code fence) valid against this JSON Schema:\n${JSON.stringify(settings.outputSchema)}`,
    )
  }
  const text = parts.filter((part): part is string => typeof part === 'string' && part.trim().length > 0).join('\n\n')
  return text.length === 0 ? undefined : text
}
