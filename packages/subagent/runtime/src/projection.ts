import type { SessionSeq, StoredSessionEvent } from '@dsh/session'
import type { SessionProjections, SessionProjectionUnit } from '@dsh/session-projection'
import { z } from 'zod'
import { SUBAGENT_DESCRIPTOR_EVENT, type SubagentDescriptor, subagentDescriptorSchema } from './descriptor.js'
import type {
  SubagentIdentityProjection,
  SubagentIdentityState,
  SubagentProfileProjection,
  SubagentProfileState,
  SubagentTimingProjection,
  SubagentTimingState,
} from './projection-types.js'

export const SUBAGENT_IDENTITY_KEY = 'subagent'
export const SUBAGENT_TIMING_KEY = 'subagentTiming'
export const SUBAGENT_PROFILE_KEY = 'subagentProfile'
export const SUBAGENT_PROFILE_STATE_VERSION = 1
/** Bumped to 2 when `seq` joined the identity: older checkpoint rows are ignored and refolded. */
export const SUBAGENT_IDENTITY_STATE_VERSION = 2
export const SUBAGENT_TIMING_STATE_VERSION = 1

const EMPTY_IDENTITY: SubagentIdentityState = Object.freeze({})

/**
 * The one interpretation of a logged descriptor payload: the strict v2 schema,
 * or `undefined` for anything corrupt or of another version. Both descriptor
 * units fold through it; nothing else parses logged descriptors.
 */
function interpretDescriptor(data: unknown): SubagentDescriptor | undefined {
  const parsed = subagentDescriptorSchema.safeParse(data)
  return parsed.success ? parsed.data : undefined
}

const seqSchema = z
  .int()
  .nonnegative()
  .transform((value) => value as SessionSeq)
const identitySchema = z.discriminatedUnion('mode', [
  z.strictObject({ mode: z.literal('one-shot'), label: z.string().min(1).exactOptional(), seq: seqSchema }),
  z.strictObject({ mode: z.literal('continuable'), label: z.string().min(1), seq: seqSchema }),
])
const identityStateSchema: z.ZodType<SubagentIdentityState> = z.strictObject({ identity: identitySchema.exactOptional() })

/**
 * The `subagent` identity unit: the only code that interprets logged
 * descriptors. Last-wins, and it never throws: a corrupt or unknown-version
 * payload resets to `{}` (view `null`) exactly like a log without a
 * descriptor, so a fork of a healthy ancestor cannot keep an identity its own
 * descriptor does not stand up.
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
const profileStateSchema: z.ZodType<SubagentProfileState> = z.strictObject({
  profile: z.strictObject({ seq: seqSchema, descriptor: subagentDescriptorSchema }).exactOptional(),
})

/**
 * The `subagentProfile` unit: the child's whole descriptor (provider and
 * capabilities — persona, instructions, model, toolFilter, outputSchema) with
 * its seq, so the runtime can honour them on resume without a parser of its
 * own. Same discipline as `subagent`: last-wins, a corrupt or unknown-version
 * payload resets to `null`, never throws. Not part of the catalog rows.
 */
export const subagentProfileUnit: SessionProjectionUnit<'subagentProfile'> = Object.freeze({
  key: SUBAGENT_PROFILE_KEY,
  stateVersion: SUBAGENT_PROFILE_STATE_VERSION,
  init: (): SubagentProfileState => EMPTY_PROFILE,
  apply(state: SubagentProfileState, event: StoredSessionEvent): SubagentProfileState {
    if (event.type !== SUBAGENT_DESCRIPTOR_EVENT) return state
    const descriptor = interpretDescriptor(event.data)
    if (descriptor === undefined) return state.profile === undefined ? state : EMPTY_PROFILE
    return Object.freeze({ profile: Object.freeze({ seq: event.seq, descriptor }) })
  },
  view: (state: SubagentProfileState): SubagentProfileProjection | null => state.profile ?? null,
  schema: profileStateSchema,
})

const INITIAL_TIMING: SubagentTimingState = Object.freeze({ settledMs: 0 })

const timingStateSchema: z.ZodType<SubagentTimingState> = z.strictObject({
  settledMs: z.number().nonnegative().finite(),
  activeTurn: z.strictObject({ turn: z.number().finite(), startedAt: z.number().finite() }).exactOptional(),
})

/**
 * The `subagentTiming` unit: milliseconds spent in settled turns plus the
 * active turn. A descriptor resets it, so time spent in turns inherited
 * through a fork prefix is never billed to the child. Never throws.
 */
export const subagentTimingUnit: SessionProjectionUnit<'subagentTiming'> = Object.freeze({
  key: SUBAGENT_TIMING_KEY,
  stateVersion: SUBAGENT_TIMING_STATE_VERSION,
  init: (): SubagentTimingState => INITIAL_TIMING,
  apply(state: SubagentTimingState, event: StoredSessionEvent): SubagentTimingState {
    switch (event.type) {
      case SUBAGENT_DESCRIPTOR_EVENT:
        return state === INITIAL_TIMING ? state : INITIAL_TIMING
      case 'turn/start': {
        const turn = turnOf(event)
        if (turn === undefined || !Number.isFinite(event.time)) return state
        return Object.freeze({ settledMs: state.settledMs, activeTurn: Object.freeze({ turn, startedAt: event.time }) })
      }
      case 'turn/end': {
        const active = state.activeTurn
        if (active === undefined || turnOf(event) !== active.turn || !Number.isFinite(event.time)) return state
        return Object.freeze({ settledMs: state.settledMs + Math.max(0, event.time - active.startedAt) })
      }
      default:
        return state
    }
  },
  view: (state: SubagentTimingState): SubagentTimingProjection =>
    Object.freeze({ settledMs: state.settledMs, activeTurn: state.activeTurn ?? null }),
  schema: timingStateSchema,
})

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
