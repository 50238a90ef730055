import { SessionProjectionError } from './errors.js'
import type { ProjectionCheckpointRows, ProjectionSnapshot } from './types.js'
import type { ErasedUnit } from './unit.js'

/**
 * Views checkpoint rows through their units. A missing row, a row of another
 * `stateVersion` and a `failed` row leave the key absent; a row that is not a
 * row, or whose state fails the unit's schema, is poisoned and throws
 * `SESSION_PROJECTION_INVALID_CHECKPOINT` (consumers treat that as a miss).
 */
export function viewRows(rows: ProjectionCheckpointRows, units: readonly ErasedUnit[]): ProjectionSnapshot {
  if (typeof rows !== 'object' || rows === null || Array.isArray(rows)) throw poisoned('the rows are not an object')
  const out: Record<string, unknown> = {}
  for (const unit of units) {
    if (!Object.hasOwn(rows, unit.key)) continue
    const row = rows[unit.key] as unknown
    if (typeof row !== 'object' || row === null) throw poisoned(`the row of '${unit.key}' is not an object`, unit.key)
    const { stateVersion, seq, state, failed } = row as { stateVersion?: unknown; seq?: unknown; state?: unknown; failed?: unknown }
    if (typeof stateVersion !== 'number') throw poisoned(`the row of '${unit.key}' has no numeric stateVersion`, unit.key)
    // Another version's state means nothing to this unit: ignored, never parsed.
    if (stateVersion !== unit.stateVersion) continue
    if (!isCursor(seq)) throw poisoned(`the row of '${unit.key}' has an invalid seq ${JSON.stringify(seq)}`, unit.key)
    if (failed !== undefined && failed !== true) throw poisoned(`the row of '${unit.key}' has an invalid failed flag`, unit.key)
    if (failed === true) continue
    const parsed = unit.schema.safeParse(state)
    if (!parsed.success) throw poisoned(`the state of '${unit.key}' fails the unit's schema`, unit.key, parsed.error)
    try {
      out[unit.key] = unit.view(parsed.data)
    } catch {
      // Same rule as live: a state whose view throws has no value.
    }
  }
  return Object.freeze(out) as ProjectionSnapshot
}

function isCursor(value: unknown): boolean {
  return value === -1 || (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0))
}

function poisoned(why: string, key?: string, cause?: unknown): SessionProjectionError {
  return new SessionProjectionError(
    'SESSION_PROJECTION_INVALID_CHECKPOINT',
    `Poisoned projection checkpoint: ${why}. Treat it as a cache miss and fold the log instead.`,
    {
      ...(cause === undefined ? {} : { cause }),
      ...(key === undefined ? {} : { details: { key } }),
    },
  )
}
