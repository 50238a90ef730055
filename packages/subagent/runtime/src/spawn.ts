import type { Session } from '@dsh/session'
import { budgetOf } from './budget.js'
import { planBudget } from './budget-guard.js'
import type { ChildProfile, RuntimeCore } from './core.js'
import { SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_DESCRIPTOR_VERSION, type SubagentDescriptor } from './descriptor.js'
import { isSubagentDescriptor } from './descriptor-checks.js'
import { SubagentError } from './errors.js'
import { checkInputText, checkRecordBytes, checkSettingsDepth, checkSpawnText } from './limits.js'
import { latestClosedCut } from './log-scan.js'
import { mergeSettings, SUBAGENT_OPTIONS_EVENT, type SubagentOptions, type SubagentSettings, splitSettings } from './options.js'
import { outputChecksForSpawn } from './output-checks.js'
import type { SubagentIdentityProjection } from './projection-types.js'
import { startChild } from './runs.js'
import type { SpawnOptions, SubagentHandle } from './runtime-types.js'
import { spawnSchemas } from './schema-loader.js'

/**
 * `spawn`: a new child of a live parent.
 *
 * Invariants:
 * - Everything is checked before the child exists, so a bad request leaves
 *   no debris: depth, context, descriptor, settings and `outputSchema`, and
 *   the bounds of `limits.ts` (every record it writes fits one event).
 * - The child's first own event is its descriptor, exactly what the
 *   harness's descriptor schema accepts (one-shot `{version, mode, provider,
 *   label?}`; continuable adds `agentProvider`, `agentModel`, `persona`,
 *   `toolFilter`). The settings the descriptor has no room for follow as one
 *   `subagent/options` event, and only when there are any.
 * - The child is live when `spawn` returns; its first run starts at once.
 */
export function spawnChild(core: RuntimeCore, parent: Session | string, options: SpawnOptions): SubagentHandle {
  core.assertLive()
  core.assertWritable()
  const sessions = core.sessions()
  const parentSession = core.liveCaller(sessions, parent, 'SUBAGENT_PARENT_NOT_LIVE')
  const depth = parentSession.header.delegationDepth + 1
  if (depth > core.maxDepth) {
    throw new SubagentError(
      'SUBAGENT_DEPTH_EXCEEDED',
      `Session '${parentSession.id}' is at delegation depth ${parentSession.header.delegationDepth}; a child would be at depth ${depth}, beyond this runtime's maxDepth of ${core.maxDepth}.`,
      { details: { parent: parentSession.id, depth, maxDepth: core.maxDepth } },
    )
  }
  if (options.context !== 'fresh' && options.context !== 'fork') {
    throw new SubagentError('SUBAGENT_INVALID_ARGUMENT', `context must be 'fresh' or 'fork', got ${JSON.stringify(options.context)}.`)
  }
  checkInputText(options.prompt, 'prompt')
  const planned: { ledger?: ReturnType<typeof planBudget>['ledger'] } = {}
  const { descriptor, recorded } = prepareRecords(options, core.driver.name, (settings) => {
    const plan = planBudget(core, parentSession, settings)
    planned.ledger = plan.ledger
    return plan.settings
  })
  const common = {
    origin: 'subagent' as const,
    delegationDepth: depth,
    ...(parentSession.header.cwd === undefined ? {} : { cwd: parentSession.header.cwd }),
    ...(options.agentPreset === undefined ? {} : { agentPreset: options.agentPreset }),
  }
  const child =
    options.context === 'fork'
      ? sessions.fork(parentSession, {
          ...common,
          boundary: options.boundary ?? latestClosedCut(parentSession),
          ...(options.id === undefined ? {} : { childId: options.id }),
        })
      : sessions.create({ ...common, parentSession: parentSession.id, ...(options.id === undefined ? {} : { id: options.id }) })
  const event = child.append(SUBAGENT_DESCRIPTOR_EVENT, descriptor)
  if (recorded !== undefined) child.append(SUBAGENT_OPTIONS_EVENT, recorded)
  const identity: SubagentIdentityProjection =
    descriptor.mode === 'continuable'
      ? { mode: 'continuable', label: descriptor.label, seq: event.seq }
      : { mode: 'one-shot', seq: event.seq, ...(descriptor.label === undefined ? {} : { label: descriptor.label }) }
  const profile: ChildProfile = { descriptor, settings: mergeSettings(descriptor, recorded) }
  if (planned.ledger !== undefined) core.ledgers.set(child.id, planned.ledger(child.id))
  const handle = startChild(core, sessions, child, 'spawn', identity, profile, options.prompt)
  const budget = budgetOf(profile.settings)
  return Object.keys(budget).length === 0 ? handle : { ...handle, budget }
}

/** The descriptor and the options record a spawn writes, validated. */
function prepareRecords(
  options: SpawnOptions,
  driverName: string,
  budget: (settings: SubagentSettings) => SubagentSettings,
): { descriptor: SubagentDescriptor; recorded: SubagentOptions | undefined } {
  const settings = parseSettings(options.settings)
  const label = options.label
  if (label !== undefined && (typeof label !== 'string' || label.length === 0)) {
    throw new SubagentError(
      'SUBAGENT_INVALID_DESCRIPTOR',
      `Cannot spawn: a label must be a non-empty string, got ${JSON.stringify(label)}.`,
    )
  }
  if (options.mode === 'continuable' && label === undefined) {
    throw new SubagentError(
      'SUBAGENT_INVALID_DESCRIPTOR',
      'Cannot spawn: a continuable child needs a non-empty label (its parent addresses it by it).',
    )
  }
  const provider = options.provider ?? driverName
  if (typeof provider !== 'string' || provider.length === 0) {
    throw new SubagentError(
      'SUBAGENT_INVALID_DESCRIPTOR',
      `Cannot spawn: the provider must be a non-empty string, got ${JSON.stringify(provider)}.`,
    )
  }
  checkSpawnText({ label, provider, agentPreset: options.agentPreset }, settings)
  const { composition, options: recorded } = splitSettings(options.mode, budget(settings))
  const descriptor = checkedDescriptor({
    version: SUBAGENT_DESCRIPTOR_VERSION,
    mode: options.mode,
    provider,
    ...(label === undefined ? {} : { label }),
    ...composition,
  })
  checkRecordBytes(SUBAGENT_DESCRIPTOR_EVENT, descriptor)
  if (recorded !== undefined) checkRecordBytes(SUBAGENT_OPTIONS_EVENT, recorded)
  if (recorded?.outputSchema !== undefined) outputChecksForSpawn().compileOutputSchema(recorded.outputSchema)
  return { descriptor, recorded }
}

/**
 * No settings (absent, or `{}`) need no schema; any other value is held to
 * `SETTINGS_MAX_DEPTH` and `SETTINGS_MAX_VALUES`, then parsed by the settings schema, whose issues a
 * refusal quotes.
 */
function parseSettings(settings: unknown): SubagentSettings {
  if (settings === undefined || settings === null || (isEmptyObject(settings) && Object.getPrototypeOf(settings) === Object.prototype))
    return {}
  checkSettingsDepth(settings)
  const parsed = spawnSchemas().subagentSettingsSchema.safeParse(settings)
  if (!parsed.success) throw invalid(parsed.error.issues, 'settings')
  return parsed.data
}

function isEmptyObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  for (const _ in value) return false
  return true
}

/** The descriptor spawn writes, held to the v2 rules; a refusal quotes the descriptor schema's issues. */
function checkedDescriptor(candidate: Record<string, unknown>): SubagentDescriptor {
  if (isSubagentDescriptor(candidate)) return candidate
  const parsed = spawnSchemas().subagentDescriptorSchema.safeParse(candidate)
  if (!parsed.success) throw invalid(parsed.error.issues, 'descriptor')
  return parsed.data
}

function invalid(issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[], what: string): SubagentError {
  const why = issues.map((issue) => `${issue.path.length > 0 ? issue.path.map(String).join('.') : what}: ${issue.message}`).join('; ')
  return new SubagentError('SUBAGENT_INVALID_DESCRIPTOR', `Cannot spawn: the subagent ${what} would be invalid (${why}).`)
}
