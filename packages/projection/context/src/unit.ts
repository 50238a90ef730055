import type { StoredSessionEvent } from '@dsh/session'
import type { SessionProjectionUnit } from '@dsh/session-projection'
import { compactionEnd, compactionStart, compactionSummary, prune } from './compaction.js'
import { type Draft, initState, warn } from './draft.js'
import { HANDLERS } from './fold.js'
import { isObject, type Json } from './read.js'
import { sessionContextStateSchema } from './schema.js'
import { SESSION_CONTEXT_KEY, type SessionContextState } from './types.js'

/** Moves whenever the fold or the state changes: a checkpoint row of another version is ignored and the log refolded. */
export const SESSION_CONTEXT_STATE_VERSION = 4

const FOLDS: Readonly<Record<string, (next: Draft, event: StoredSessionEvent, data: Json) => void>> = {
  ...HANDLERS,
  'compaction/start': compactionStart,
  'compaction/summary': compactionSummary,
  'compaction/end': compactionEnd,
  'compaction/prune': prune,
}

/** Types an import may wrap whole (`v0/event`, data = the harness's line) that this fold reads; their data is the harness's either way. */
const WRAPPED: ReadonlySet<string> = new Set([
  'step/start',
  'step/end',
  'compaction/start',
  'compaction/summary',
  'compaction/end',
  'compaction/prune',
])

function unwrap(event: StoredSessionEvent): { type: string; data: unknown } {
  if (event.type === 'v0/event' && isObject(event.data) && typeof event.data.type === 'string' && WRAPPED.has(event.data.type)) {
    return { type: event.data.type, data: event.data.data }
  }
  return event
}

/**
 * Folds one event. Every known type records the event's seq (a resumed fold
 * continues after it); an unknown type returns the same state. The inherited
 * prefix of a fork is folded like the rest: the model sees it.
 */
export function applyContextEvent(state: SessionContextState, event: StoredSessionEvent): SessionContextState {
  const { type, data } = unwrap(event)
  const fold = Object.hasOwn(FOLDS, type) ? FOLDS[type] : undefined
  if (fold === undefined) return state
  const next: Draft = { ...state }
  if (typeof event.seq === 'number' && Number.isSafeInteger(event.seq) && event.seq > state.seq) next.seq = event.seq
  if (isObject(data)) fold(next, { ...event, seq: next.seq as StoredSessionEvent['seq'] }, data)
  else warn(next, 'invalid-event')
  return next
}

/** The `sessionContext` unit: its view is its state (reading it costs nothing; `contextView` derives the model's messages). */
export const sessionContextUnit: SessionProjectionUnit<typeof SESSION_CONTEXT_KEY> = {
  key: SESSION_CONTEXT_KEY,
  stateVersion: SESSION_CONTEXT_STATE_VERSION,
  init: initState,
  apply: applyContextEvent,
  view: (state) => state,
  schema: sessionContextStateSchema,
}
