import { DshError } from '@dsh/context'

export type SessionStatsErrorCode =
  /** A price table fails its schema (the message names each bad path). */
  | 'SESSION_STATS_INVALID_PRICE_TABLE'
  /** A price table file cannot be read, is not a regular file, is over `PRICE_TABLE_MAX_BYTES`, or is not JSON. */
  | 'SESSION_STATS_PRICE_TABLE_UNREADABLE'
  /** A title to write is not a string or is empty once normalized. */
  | 'SESSION_STATS_INVALID_TITLE'
  /** A cached `sessionStats` or `sessionTitle` state fails its unit's schema (a schema's refusal; the row is a miss). */
  | 'SESSION_STATS_INVALID_STATE'

export class SessionStatsError extends DshError<SessionStatsErrorCode> {}
