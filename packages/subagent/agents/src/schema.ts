import { z } from 'zod'

/**
 * What an agent name may be: lower-case letters, digits, `-` and `_`,
 * starting with a letter or digit, at most 64 characters. It is also the
 * file's name (`<name>.md`), so a name can never reach outside its
 * directory (no `/`, no `..`) nor collide on a case-insensitive file system.
 */
export const AGENT_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,63}$/

/** The largest definition file read, in bytes. */
export const MAX_DEFINITION_BYTES = 256 * 1024
/** The most definition files one directory may hold. */
export const MAX_DEFINITIONS_PER_DIRECTORY = 1000

/**
 * The providers a definition may name: the model APIs dsh has drivers for
 * (OpenAI-compatible Chat Completions/Responses, Anthropic Messages). A
 * program that runs children on one of them refuses, when the child is
 * started, a definition naming the other.
 */
export const AGENT_PROVIDERS = ['openai', 'anthropic'] as const
export type AgentProvider = (typeof AGENT_PROVIDERS)[number]

const nonEmpty = (max: number) =>
  z.string('must be a string').trim().min(1, 'must not be empty').max(max, `must be at most ${max} characters`)
const positiveInt = z.int('must be an integer').positive('must be positive')

/**
 * Limits on what a child started from the definition may spend. Each is
 * optional; a budget left out is not limited by the definition. The names
 * are the runtime's per-child budget names.
 */
export const agentBudgetsSchema = z.strictObject(
  {
    /** Tokens the child may use, counted from its steps' usage. */
    maxTokens: positiveInt.exactOptional(),
    /** US dollars the child may spend, priced from the configured price table. */
    maxCostUsd: z.number('must be a number').positive('must be positive').finite().exactOptional(),
    /** Wall-clock milliseconds the child may run. */
    maxWallMs: positiveInt.exactOptional(),
    /** Turns the child may take. */
    maxTurns: positiveInt.exactOptional(),
  },
  'must be a mapping of maxTokens, maxCostUsd, maxWallMs and maxTurns',
)

/** The frontmatter of a definition file. Strict: a key it does not list is refused. */
export const agentFrontmatterSchema = z.strictObject({
  name: z.string('must be a string').regex(AGENT_NAME_PATTERN, 'must be lower-case letters, digits, - or _ (at most 64)'),
  description: nonEmpty(1024),
  provider: z.enum(AGENT_PROVIDERS, `must be one of ${AGENT_PROVIDERS.join(', ')}`).exactOptional(),
  model: nonEmpty(200).exactOptional(),
  tools: z
    .array(nonEmpty(128), 'must be a list of tool names')
    .refine((names) => new Set(names).size === names.length, 'names a tool twice')
    .exactOptional(),
  budgets: agentBudgetsSchema.exactOptional(),
})

export type AgentBudgets = z.output<typeof agentBudgetsSchema>
export type AgentFrontmatter = z.output<typeof agentFrontmatterSchema>

/** Where a definition was found: the root's directory or the project's (which wins a name both have). */
export type AgentDefinitionScope = 'root' | 'project'

/** One definition, validated. */
export interface AgentDefinition {
  readonly name: string
  readonly description: string
  readonly provider?: AgentProvider
  readonly model?: string
  /** The tools a child started from it may call; absent: the runtime's tools, unrestricted. */
  readonly tools?: readonly string[]
  readonly budgets?: AgentBudgets
  /** The markdown body (trimmed): the child's standing instructions. */
  readonly instructions: string
  /** The file it was read from. */
  readonly file: string
  readonly scope: AgentDefinitionScope
}
