import type { StoredSessionEvent } from '@dsh/session'
import type { ProjectionStateSchema, SessionProjections, SessionProjectionUnit } from '@dsh/session-projection'
import type { SubagentDescriptor } from './descriptor.js'
import { isProfileState, isSubagentDescriptor, isSubagentOptions } from './descriptor-checks.js'
import { SUBAGENT_DESCRIPTOR_EVENT, SUBAGENT_OPTIONS_EVENT } from './event-names.js'
import { SUBAGENT_END_EVENT } from './lifecycle.js'
import type { SubagentOptions } from './options.js'
import type {
  SubagentIdentityProjection,
  SubagentIdentityState,
  SubagentProfileProjection,
  SubagentProfileState,
  SubagentTimingProjection,
  SubagentTimingState,
} from './projection-types.js'
import { isIdentityState, isTimingState, plainSchema } from './state-checks.js'

export const SUBAGENT_IDENTITY_KEY = 'subagent'
export const SUBAGENT_TIMING_KEY = 'subagentTiming'
export const SUBAGENT_PROFILE_KEY = 'subagentProfile'

/**
 * State versions. A checkpoint row of another version is ignored and the
 * session refolded, so each moves whenever its unit's fold or state changes:
 * - identity 3: the descriptor schema is the harness's, key for key (a
 *   one-shot descriptor with composition fields is corrupt, any string is a
 *   label), so a row folded under the wider schema must not be served;
 * - profile 2: the state holds the options recorded after the descriptor;
 * - timing 4: the state says whether the session's own log holds its final
 *   `subagent/end {reason:'closed'}` (since 3 it holds the span of the
 *   session's own events, since 2 a turn open when the descriptor arrives).
 */
export const SUBAGENT_IDENTITY_STATE_VERSION = 3
export const SUBAGENT_PROFILE_STATE_VERSION = 2
export const SUBAGENT_TIMING_STATE_VERSION = 4

const EMPTY_IDENTITY: SubagentIdentityState = Object.freeze({})

/**
 * The one interpretation of a logged descriptor payload: the strict v2 rules
 * (`descriptor-checks.ts`), or `undefined` for anything corrupt or of another
 * version. Both descriptor units fold through it; nothing else interprets
 * logged descriptors.
 */
function interpretDescriptor(data: unknown): SubagentDescriptor | undefined {
  return isSubagentDescriptor(data) ? data : undefined
}

/** A cached row is checked plainly (`state-checks.ts`): a listing loads no zod. */
const identityStateSchema: ProjectionStateSchema<SubagentIdentityState> = plainSchema(SUBAGENT_IDENTITY_KEY, isIdentityState)

/**
 * The `subagent` identity unit: the only code that interprets logged
 * descriptors for the catalog. Last-wins, and it never throws: a corrupt or
 * unknown-version payload resets to `{}` (view `null`) exactly like a log
 * without a descriptor, so a fork of a healthy ancestor cannot keep an
 * identity its own descriptor does not stand up.
 */
export const subagentIdentityUnit: SessionProjectionUnit<'subagent'> = Object.freeze({
  key: SUBAGENT_IDENTITY_KEY,
  stateVersion: SUBAGENT_IDENTITY_STATE_VERSION,
  init: (): SubagentIdentityState => EMPTY_IDENTITY,
  apply(state: SubagentIdentityState, event: StoredSessionEvent): SubagentIdentityState {
    if (event.type !== SUBAGENT_DESCRIPTOR_EVENT) return state
    const descriptor = interpretDescriptor(event.data)
    if (descriptor === undefined) return state.identity === undefined ? state : EMPTY_IDENTITY
    const identity: SubagentIdentityProjection =
      descriptor.mode === 'continuable'
        ? { mode: 'continuable', label: descriptor.label, seq: event.seq }
        : descriptor.label === undefined
          ? { mode: 'one-shot', seq: event.seq }
          : { mode: 'one-shot', label: descriptor.label, seq: event.seq }
    return Object.freeze({ identity: Object.freeze(identity) })
  },
  view: (state: SubagentIdentityState): SubagentIdentityProjection | null => state.identity ?? null,
  schema: identityStateSchema,
})

const EMPTY_PROFILE: SubagentProfileState = Object.freeze({})
const profileStateSchema: ProjectionStateSchema<SubagentProfileState> = plainSchema(SUBAGENT_PROFILE_KEY, isProfileState)

function interpretOptions(data: unknown): SubagentOptions | undefined {
  return isSubagentOptions(data) ? data : undefined
}

/**
 * The `subagentProfile` unit: the child's descriptor and the options recorded
 * after it, each with its seq, so the runtime can honour them on resume
 * without a parser of its own. A descriptor (valid or not) starts a new
 * profile and drops earlier options, so options inherited through a fork
 * never apply to the child; a valid options event replaces earlier ones and
 * an invalid one drops them. Never throws. Not part of the catalog rows.
 */
export const subagentProfileUnit: SessionProjectionUnit<'subagentProfile'> = Object.freeze({
  key: SUBAGENT_PROFILE_KEY,
  stateVersion: SUBAGENT_PROFILE_STATE_VERSION,
  init: (): SubagentProfileState => EMPTY_PROFILE,
  apply(state: SubagentProfileState, event: StoredSessionEvent): SubagentProfileState {
    if (event.type === SUBAGENT_DESCRIPTOR_EVENT) {
      const descriptor = interpretDescriptor(event.data)
      if (descriptor === undefined) return state === EMPTY_PROFILE ? state : EMPTY_PROFILE
      return Object.freeze({ profile: Object.freeze({ seq: event.seq, descriptor }) })
    }
    if (event.type !== SUBAGENT_OPTIONS_EVENT) return state
    const options = interpretOptions(event.data)
    if (options === undefined) {
      if (state.options === undefined) return state
      return state.profile === undefined ? EMPTY_PROFILE : Object.freeze({ profile: state.profile })
    }
    const record = Object.freeze({ seq: event.seq, options })
    return Object.freeze(state.profile === undefined ? { options: record } : { profile: state.profile, options: record })
  },
  view: (state: SubagentProfileState): SubagentProfileProjection | null =>
    state.profile === undefined
      ? null
      : Object.freeze({ seq: state.profile.seq, descriptor: state.profile.descriptor, options: state.options ?? null }),
  schema: profileStateSchema,
})

const INITIAL_TIMING: SubagentTimingState = Object.freeze({ settledMs: 0 })

// Every number here is finite. A cached row is checked plainly.
const timingStateSchema: ProjectionStateSchema<SubagentTimingState> = plainSchema(SUBAGENT_TIMING_KEY, isTimingState)

/**
 * The `subagentTiming` unit: milliseconds spent in settled turns plus the
 * active turn, and the wall-clock span of the session's own events. A
 * descriptor zeroes the settled time, so turns inherited through a fork
 * prefix are never billed to the child, and keeps the turn that is open when
 * it arrives: a child may write its descriptor inside its first turn, and
 * that turn is the child's own. The wall-clock span runs over the events the
 * unit reads (descriptor, turn starts and ends), so other events leave the
 * state as it is and write no checkpoint: it starts at the first of them, or
 * at the descriptor for a subagent (inherited events are not the child's, and
 * an open turn it keeps may be its parent's), and ends at the latest time
 * since. Events without a finite time leave the span alone. It also marks
 * the child `closed` at its final `subagent/end {reason:'closed'}`, so a
 * catalog row can tell a closed child from one that takes messages at no
 * read of its own; a descriptor clears the mark with the rest (a fork of a
 * closed session is not closed). Never throws.
 */
export const subagentTimingUnit: SessionProjectionUnit<'subagentTiming'> = Object.freeze({
  key: SUBAGENT_TIMING_KEY,
  stateVersion: SUBAGENT_TIMING_STATE_VERSION,
  init: (): SubagentTimingState => INITIAL_TIMING,
  apply(state: SubagentTimingState, event: StoredSessionEvent): SubagentTimingState {
    const time = Number.isFinite(event.time) ? event.time : undefined
    switch (event.type) {
      case SUBAGENT_DESCRIPTOR_EVENT:
        return timing(0, state.activeTurn, time === undefined ? undefined : { startedAt: time, endedAt: time })
      case SUBAGENT_END_EVENT:
        return state.closed === true || !isCloseEnd(event) ? state : Object.freeze({ ...state, closed: true as const })
      case 'turn/start': {
        const turn = turnOf(event)
        if (turn === undefined || time === undefined) return stamp(state, time)
        return timing(state.settledMs, Object.freeze({ turn, startedAt: time }), spanTo(state, time), state.closed)
      }
      case 'turn/end': {
        const active = state.activeTurn
        if (active === undefined || turnOf(event) !== active.turn || time === undefined) return stamp(state, time)
        return timing(addSettled(state.settledMs, time - active.startedAt), undefined, spanTo(state, time), state.closed)
      }
      default:
        return state
    }
  },
  view: (state: SubagentTimingState): SubagentTimingProjection =>
    Object.freeze({
      settledMs: state.settledMs,
      activeTurn: state.activeTurn ?? null,
      startedAt: state.startedAt ?? null,
      endedAt: state.endedAt ?? null,
      closed: state.closed === true,
    }),
  schema: timingStateSchema,
})

interface TimingSpan {
  readonly startedAt: number
  readonly endedAt: number
}

function timing(
  settledMs: number,
  activeTurn: SubagentTimingState['activeTurn'],
  span: TimingSpan | undefined,
  closed?: true | undefined,
): SubagentTimingState {
  return Object.freeze({
    settledMs,
    ...(activeTurn === undefined ? {} : { activeTurn }),
    ...span,
    ...(closed === undefined ? {} : { closed }),
  })
}

/**
 * `settledMs` plus a turn that lasted `spent` ms (nothing when it ended before
 * it started), saturating at the largest double: the store takes any finite
 * times, and a turn from -1e308 to 1e308 would otherwise make the state
 * Infinity, which its own checks refuse.
 */
function addSettled(settledMs: number, spent: number): number {
  return Math.min(Number.MAX_VALUE, settledMs + Math.max(0, spent))
}

/** The span of `state` stretched to an event at `time`. */
function spanTo(state: SubagentTimingState, time: number): TimingSpan {
  return state.startedAt === undefined || state.endedAt === undefined
    ? { startedAt: time, endedAt: time }
    : { startedAt: state.startedAt, endedAt: Math.max(state.endedAt, time) }
}

/** `state` with its span stretched to an event at `time` (the same reference when that changes nothing). */
function stamp(state: SubagentTimingState, time: number | undefined): SubagentTimingState {
  if (time === undefined || (state.endedAt !== undefined && time <= state.endedAt)) return state
  return timing(state.settledMs, state.activeTurn, spanTo(state, time), state.closed)
}

/** A `subagent/end` that closes the child for good (the runtime writes it last, with no turn). */
function isCloseEnd(event: StoredSessionEvent): boolean {
  const data = event.data
  return typeof data === 'object' && data !== null && (data as { reason?: unknown }).reason === 'closed'
}

function turnOf(event: StoredSessionEvent): number | undefined {
  const data = event.data
  if (typeof data !== 'object' || data === null || Array.isArray(data)) return undefined
  const turn = (data as { turn?: unknown }).turn
  return typeof turn === 'number' && Number.isFinite(turn) ? turn : undefined
}

/** Registers the subagent units (identity, timing, profile); returns one disposer for all. */
export function registerSubagentUnits(projections: SessionProjections): () => void {
  const disposers = [
    projections.register(subagentIdentityUnit),
    projections.register(subagentTimingUnit),
    projections.register(subagentProfileUnit),
  ]
  return () => {
    for (const dispose of disposers.reverse()) dispose()
  }
}
