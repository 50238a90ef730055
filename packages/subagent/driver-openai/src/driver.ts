import type { SubagentDriver, SubagentRun, SubagentRunOutcome } from '@dsh/subagent'
import { type AgentTurnOptions, runAgentTurn } from './agent.js'
import { createModelClient, type ModelClient, type ModelClientOptions } from './model.js'
import type { AgentTool } from './tools.js'

export interface OpenAIDriverOptions extends ModelClientOptions {
  /** An existing client (shared with a top-level agent); otherwise one is made from the options. */
  readonly client?: ModelClient
  /**
   * The tools for a run when the runtime does not hand the driver any
   * (`run.tools`); the runtime's list, already filtered by the child's
   * `toolFilter`, wins.
   */
  readonly tools?: (run: SubagentRun) => readonly AgentTool[]
  readonly maxSteps?: number
  readonly system?: string
  readonly notices?: AgentTurnOptions['notices']
  /** Called after each event a child's turn appends (the CLI prints children's progress from it). */
  readonly onEvent?: (run: SubagentRun, event: Parameters<NonNullable<AgentTurnOptions['onEvent']>>[0]) => void
  /** Written into descriptors as the default `provider` (default `openai`). */
  readonly name?: string
}

/**
 * A `SubagentDriver` over an OpenAI-compatible Chat Completions API. Each run
 * is one agent turn over the child's own log (a fork child's context starts
 * with the prefix it inherited). Interrupts end the turn `cancelled`, the
 * runtime's reason for it.
 */
export function createOpenAIDriver(options: OpenAIDriverOptions = {}): SubagentDriver {
  const client = options.client ?? createModelClient(options)
  return Object.freeze({
    name: options.name ?? 'openai',
    async run(run: SubagentRun): Promise<SubagentRunOutcome> {
      const given = (run as SubagentRun & { readonly tools?: readonly AgentTool[] }).tools
      const tools = given ?? options.tools?.(run) ?? []
      const model = (run.descriptor as { model?: unknown } | undefined)?.model
      const system = (run.descriptor as { instructions?: unknown } | undefined)?.instructions
      const outcome = await runAgentTurn({
        client,
        session: run.session,
        turn: run.turn,
        tools,
        signal: run.signal,
        abortReason: 'cancelled',
        ...(typeof model === 'string' ? { model } : {}),
        ...(typeof system === 'string' ? { system } : options.system === undefined ? {} : { system: options.system }),
        ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
        ...(options.notices === undefined ? {} : { notices: options.notices }),
        ...(options.onEvent === undefined ? {} : { onEvent: (event) => options.onEvent?.(run, event) }),
      })
      return outcome
    },
  })
}
