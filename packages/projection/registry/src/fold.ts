import type { SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import { SessionProjectionError } from './errors.js'
import type { ProjectionInitContext, ProjectionMetrics, ProjectionSnapshot } from './types.js'
import type { ErasedUnit } from './unit.js'

/**
 * A detached fold of a cold observation: every unit from `init` (told the
 * cut, as a live cell is) over every event, nothing kept. A unit that throws (in `init`, `apply` or `view`) is
 * absent from the result, exactly as it would be absent live.
 */
export function foldDetached(
  events: readonly StoredSessionEvent[],
  inheritedEventCount: number,
  units: readonly ErasedUnit[],
  metrics: ProjectionMetrics,
): ProjectionSnapshot {
  validateFoldInput(events, inheritedEventCount)
  const context: ProjectionInitContext = Object.freeze({ inheritedEventCount: inheritedEventCount as SessionLogOffset })
  const out: Record<string, unknown> = {}
  for (const unit of units) {
    let state: unknown
    try {
      state = unit.init(context)
      for (const event of events) {
        metrics.detachedApplies++
        state = unit.apply(state, event)
      }
      out[unit.key] = unit.view(state)
    } catch {
      // Isolation: this unit's value is absent; the others still fold.
    }
  }
  return Object.freeze(out) as ProjectionSnapshot
}

function validateFoldInput(events: readonly StoredSessionEvent[], inheritedEventCount: number): void {
  if (!Array.isArray(events)) throw invalid('events must be an array')
  if (!Number.isSafeInteger(inheritedEventCount) || inheritedEventCount < 0 || Object.is(inheritedEventCount, -0)) {
    throw invalid(`inheritedEventCount must be a non-negative integer, got ${String(inheritedEventCount)}`)
  }
  if (inheritedEventCount > events.length)
    throw invalid(`inheritedEventCount ${inheritedEventCount} is past the end of the ${events.length} events`)
  for (let i = 0; i < events.length; i++) {
    // A fold is only the session's value if it sees the whole log in order.
    if (events[i]?.seq !== i) throw invalid(`event ${i} has seq ${String(events[i]?.seq)}; a fold needs the whole log from seq 0 in order`)
  }
}

function invalid(why: string): SessionProjectionError {
  return new SessionProjectionError('SESSION_PROJECTION_INVALID_FOLD_INPUT', `Cannot fold: ${why}.`)
}
