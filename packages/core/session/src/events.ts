import type { SessionSeq } from './brands.js'
import type { JsonValue } from './json.js'

/** Why a turn ended. `interrupted` is written by crash repair. */
export type TurnEndReason = 'completed' | 'interrupted' | 'cancelled' | 'error'

/**
 * The event vocabulary. Packages add types by augmentation:
 * `declare module '@dsh/session' { interface SessionEventMap { 'x/y': {...} } }`
 */
export interface SessionEventMap {
  'turn/start': { turn: number }
  'turn/end': { turn: number; reason: TurnEndReason }
  'user/message': { text: string }
  'assistant/chunk': { turn: number; index: number; delta: string }
  'assistant/message': { turn: number; text: string; usage?: { input: number; output: number } }
  'tool/call': { turn: number; callId: string; name: string; arguments: JsonValue }
  'tool/result': { turn: number; callId: string; content: JsonValue; isError?: boolean }
}

export type SessionEventType = keyof SessionEventMap & string

/** One logged event. `seq` always equals its index in the log. */
export type SessionEvent<T extends SessionEventType = SessionEventType> = {
  [K in T]: {
    readonly type: K
    readonly seq: SessionSeq
    /** Wall-clock epoch ms at append. */
    readonly time: number
    /** Deep-frozen at run time. */
    readonly data: Readonly<SessionEventMap[K]>
  }
}[T]

/**
 * An event of any type, as persistence stores and returns it: persistence is
 * lossless for types it does not know.
 */
export interface StoredSessionEvent {
  readonly type: string
  readonly seq: SessionSeq
  readonly time: number
  readonly data: JsonValue
}
