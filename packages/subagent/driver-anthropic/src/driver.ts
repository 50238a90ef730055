import { type SubagentTurnDefaults, subagentTurn } from '@dsh/driver-openai/turn'
import type { SubagentDriver, SubagentRun, SubagentRunOutcome } from '@dsh/subagent'
import { runAgentTurn } from './agent.js'
import { type AnthropicClient, type AnthropicClientOptions, createAnthropicClient } from './model.js'

export interface AnthropicDriverOptions extends AnthropicClientOptions, SubagentTurnDefaults {
  /** An existing client (shared with a top-level agent); otherwise one is made from the options. */
  readonly client?: AnthropicClient
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
      return runAgentTurn({ client, ...subagentTurn(run, options) })
    },
  })
}
