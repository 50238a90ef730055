import type { SubagentDriver, SubagentRun, SubagentRunOutcome } from '@dsh/subagent'
import { runAgentTurn } from './agent.js'
import { createModelClient, type ModelClient, type ModelClientOptions } from './model.js'
import { type SubagentTurnDefaults, subagentTurn } from './turn-loop.js'

export interface OpenAIDriverOptions extends ModelClientOptions, SubagentTurnDefaults {
  /** An existing client (shared with a top-level agent); otherwise one is made from the options. */
  readonly client?: ModelClient
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
      return runAgentTurn({ client, ...subagentTurn(run, options) })
    },
  })
}
