import { z } from 'zod/mini'
import { SUBAGENT_DESCRIPTOR_VERSION, SUBAGENT_OPTIONS_VERSION } from './event-names.js'

// The zod/mini schemas of what spawn writes: the descriptor, the options
// record, the settings and budgets. A module of its own, loaded on the
// writable paths only (`schema-loader.ts`): a catalog listing folds and
// checks logged descriptors and options with the plain checks of
// `descriptor-checks.ts` (held to these schemas by the tests) and loads no
// zod. Issues read in English (spawn errors quote them).
z.config(z.locales.en())

/**
 * Which tools a child's driver is given: `allow` keeps only the named tools,
 * `deny` drops the named ones. At least one of the two must be present, and
 * nothing else.
 */
export const subagentToolFilterSchema = z
  .strictObject({
    allow: z.exactOptional(z.array(z.string())),
    deny: z.exactOptional(z.array(z.string())),
  })
  .check(z.refine((filter) => filter.allow !== undefined || filter.deny !== undefined, 'a tool filter declares allow and/or deny'))

/**
 * v2 one-shot: `{ version, mode, provider, label? }` and nothing else. Any
 * string is a label, the empty one included.
 */
export const oneShotDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('one-shot'),
  provider: z.string(),
  label: z.exactOptional(z.string()),
})

/**
 * v2 continuable: the one-shot fields with a mandatory label (it is how the
 * parent addresses the child), plus the composition a resume reapplies:
 * `agentProvider`, `agentModel`, `persona` and `toolFilter`.
 */
export const continuableDescriptorSchema = z.strictObject({
  version: z.literal(SUBAGENT_DESCRIPTOR_VERSION),
  mode: z.literal('continuable'),
  provider: z.string(),
  label: z.string(),
  agentProvider: z.exactOptional(z.string()),
  agentModel: z.exactOptional(z.string()),
  persona: z.exactOptional(z.string()),
  toolFilter: z.exactOptional(subagentToolFilterSchema),
})

/**
 * The strict v2 schema, key for key the one the harness parses persisted
 * descriptors with, so that a descriptor valid on one side is valid on the
 * other and every catalog agrees. A payload is corrupt when its version is
 * not 2, its mode is neither, a field has the wrong type, a continuable has
 * no label, or it has any key outside its mode's list. Options dsh has and
 * the harness does not (`model`, `instructions`, `maxTurns`, `outputSchema`,
 * and the composition fields on a one-shot child) live in the
 * `subagent/options` event instead.
 *
 * Only the `subagent` and `subagentProfile` projection units interpret
 * logged descriptors with it; `spawn` uses it to check what it writes.
 */
export const subagentDescriptorSchema = z.discriminatedUnion('mode', [oneShotDescriptorSchema, continuableDescriptorSchema])

const positiveInt = z.int().check(z.positive())
const positiveUsd = z.number().check(z.positive(), z.refine(Number.isFinite, 'must be a finite number of USD'))

/** The budget fields of the settings schema (strict, like every setting). */
const subagentBudgetFields = {
  maxTokens: z.exactOptional(positiveInt),
  maxCostUsd: z.exactOptional(positiveUsd),
  maxWallMs: z.exactOptional(positiveInt),
  maxTurns: z.exactOptional(positiveInt),
}

/** A budget on its own (the `subagent` tool's `budget`, an agent definition's budgets). */
export const subagentBudgetSchema = z.strictObject(subagentBudgetFields)

/** Any JSON object: an `outputSchema` is a JSON Schema document. */
const jsonSchemaObject = z.record(z.string(), z.json())
const nonEmpty = z.string().check(z.minLength(1))

/**
 * Every option a child may run with:
 *
 * - `agentProvider`, `agentModel`, `persona`, `toolFilter`: the composition a
 *   continuable descriptor carries; a one-shot descriptor has no room for
 *   them, so a one-shot child keeps them here.
 * - `outputSchema`: a JSON Schema the final message of a one-shot child must
 *   satisfy (the runtime checks it).
 * - `model`, `instructions`: settings a driver may honour.
 * - `maxTokens`, `maxCostUsd`, `maxWallMs`, `maxTurns`: the child's budget,
 *   which the runtime enforces (`budget.ts`).
 *
 * Strict: an unknown key or a field of the wrong type makes the whole record
 * invalid (it could be a newer writer's field this reader would misapply).
 */
const settingsFields = {
  agentProvider: z.exactOptional(nonEmpty),
  agentModel: z.exactOptional(nonEmpty),
  persona: z.exactOptional(z.string()),
  toolFilter: z.exactOptional(subagentToolFilterSchema),
  outputSchema: z.exactOptional(jsonSchemaObject),
  model: z.exactOptional(nonEmpty),
  instructions: z.exactOptional(z.string()),
  ...subagentBudgetFields,
}

/** The options a caller may give `spawn` (`SpawnOptions.settings`). */
export const subagentSettingsSchema = z.strictObject(settingsFields)

/** The `subagent/options` payload: `{ version: 1, ...settings }`. */
export const subagentOptionsSchema = z.strictObject({ version: z.literal(SUBAGENT_OPTIONS_VERSION), ...settingsFields })
