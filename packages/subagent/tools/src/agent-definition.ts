import { type AgentDefinition, AgentDefinitionError, type AgentDefinitions } from '@dsh/agent-definitions'
import type { SubagentBudget, SubagentSettings, SubagentToolFilter } from '@dsh/subagent'
import { ToolSubagentControlError } from './errors.js'

/**
 * What the children a `subagent` tool starts can be given. Each part left
 * out is not checked: the definition's value is passed on as it is.
 */
export interface AgentOffers {
  /** The provider the driver children run on speaks (e.g. `openai`); a definition naming another is refused. */
  readonly provider?: string
  /** Every tool name a child may be offered; a definition whose `tools` names another is refused. */
  readonly tools?: readonly string[]
}

/**
 * Where the `subagent` tool finds `agent: <name>` (an `agentDefinitions(...)`
 * from `@dsh/agent-definitions` fits), and, in `offers`, what the program can
 * honour of a definition.
 */
export interface AgentDefinitionSource extends Pick<AgentDefinitions, 'get'> {
  readonly offers?: AgentOffers
}

/** The inline arguments of a `subagent` call that a definition combines with. */
export interface InlineAgentArguments {
  readonly label?: string
  readonly instructions?: string
  readonly persona?: string
  readonly model?: string
  readonly tools?: { readonly allow?: readonly string[]; readonly deny?: readonly string[] }
}

/** What a spawn from a definition runs with. */
export interface DefinedSpawn {
  readonly label: string
  readonly settings: SubagentSettings
  /** Recorded in the child's header (`agentPreset`): which definition it was started from. */
  readonly agentPreset: string
}

/**
 * Combines a definition with the call's inline arguments:
 *
 * - instructions: the definition's body, then the inline `instructions`
 *   (appended after a blank line);
 * - `provider`/`model` become the child's `agentProvider`/`agentModel`; an
 *   inline `model` is its `model`, which a driver prefers over `agentModel`;
 * - tools: the definition's `tools` is an allow-list the call may narrow,
 *   never widen. An inline `tools.allow` must name only tools the definition
 *   allows (else `TOOL_SUBAGENT_CONTROL_INVALID_INPUT`, and nothing starts),
 *   and replaces the definition's list; an inline `tools.deny` removes tools
 *   from whichever list applies. A definition without `tools` leaves the
 *   inline filter as given;
 * - budgets: the definition's, as the child's budget settings;
 * - label: the inline `label`, else the definition's name.
 *
 * A definition asking for what `offers` says the program cannot give (a
 * provider other than its driver's, a tool its children are not offered) is
 * `AGENT_DEFINITION_UNSUPPORTED`: running it anyway would run the child on
 * another API than its model's, or without a tool it was written to use.
 */
export function definedSpawn(definition: AgentDefinition, inline: InlineAgentArguments, offers: AgentOffers = {}): DefinedSpawn {
  checkOffered(definition, offers)
  const budget: SubagentBudget = definition.budgets ?? {}
  const toolFilter = narrowedTools(definition, inline.tools)
  const instructions = inline.instructions === undefined ? definition.instructions : `${definition.instructions}\n\n${inline.instructions}`
  const settings: SubagentSettings = {
    instructions,
    ...(definition.provider === undefined ? {} : { agentProvider: definition.provider }),
    ...(definition.model === undefined ? {} : { agentModel: definition.model }),
    ...(inline.model === undefined ? {} : { model: inline.model }),
    ...(inline.persona === undefined ? {} : { persona: inline.persona }),
    ...(toolFilter === undefined ? {} : { toolFilter }),
    ...budget,
  }
  return { label: inline.label ?? definition.name, settings, agentPreset: definition.name }
}

function narrowedTools(definition: AgentDefinition, inline: InlineAgentArguments['tools']): SubagentToolFilter | undefined {
  const deny = inline?.deny === undefined ? {} : { deny: [...inline.deny] }
  if (definition.tools === undefined) {
    return inline === undefined ? undefined : { ...(inline.allow === undefined ? {} : { allow: [...inline.allow] }), ...deny }
  }
  const allowed = new Set(definition.tools)
  const widening = (inline?.allow ?? []).filter((name) => !allowed.has(name))
  if (widening.length > 0) {
    throw new ToolSubagentControlError(
      'TOOL_SUBAGENT_CONTROL_INVALID_INPUT',
      `subagent input is invalid (tools.allow: agent '${definition.name}' may only use ${definition.tools.length === 0 ? 'no tools' : definition.tools.join(', ')}; ${widening.join(', ')} would widen that). Inline tools may only narrow an agent's tools: allow a subset, or deny some.`,
      { details: { agent: definition.name, widening } },
    )
  }
  return { allow: [...(inline?.allow ?? definition.tools)], ...deny }
}

function checkOffered(definition: AgentDefinition, offers: AgentOffers): void {
  const { name, file } = definition
  if (offers.provider !== undefined && definition.provider !== undefined && definition.provider !== offers.provider) {
    throw new AgentDefinitionError(
      'AGENT_DEFINITION_UNSUPPORTED',
      `Agent '${name}' (${file}) asks for provider '${definition.provider}', but subagents here run on '${offers.provider}': nothing was started. Start it where '${definition.provider}' is the provider, or change or remove its provider.`,
      { details: { agent: name, file, provider: definition.provider, offered: offers.provider } },
    )
  }
  if (offers.tools === undefined || definition.tools === undefined) return
  const offered = new Set(offers.tools)
  const unknown = definition.tools.filter((tool) => !offered.has(tool))
  if (unknown.length > 0) {
    throw new AgentDefinitionError(
      'AGENT_DEFINITION_UNSUPPORTED',
      `Agent '${name}' (${file}) lists tools its subagent would not be offered: ${unknown.join(', ')}; nothing was started. The tools offered are ${offers.tools.length === 0 ? 'none' : offers.tools.join(', ')}: fix or remove those names.`,
      { details: { agent: name, file, unknownTools: unknown, offered: [...offers.tools] } },
    )
  }
}
