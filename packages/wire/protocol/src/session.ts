import { z } from 'zod'
import { listingCostReason } from './cost-reasons.js'
import { PAGE_MAX_LIMIT } from './limits.js'
import { choiceParam, cursorParam, idParam, intParam, jsonValue, nonNegativeInt, sessionId, textParam } from './primitives.js'

/**
 * The logical session header (`SessionHeader` of `@dsh/session`, which keeps
 * its own dependency-free parser; a type-level test keeps the two equal).
 * The inherited cut is not a header field: it travels beside the header as
 * `inheritedEventCount`.
 */
export const sessionHeader = z
  .object({
    version: z.literal(1),
    id: sessionId,
    /** Safe-integer epoch milliseconds. */
    createdAt: nonNegativeInt,
    /** Absolute working directory, when the runtime has one. */
    cwd: z.string().min(1).optional(),
    parentSession: sessionId.optional(),
    /** True when the log starts with a seed copied from another session. */
    isSeeded: z.boolean(),
    /** 0 for a top-level session; a child is its parent's depth + 1. */
    delegationDepth: nonNegativeInt,
    origin: z.literal('subagent').optional(),
    agentPreset: z.string().optional(),
  })
  .refine((header) => header.origin !== 'subagent' || header.parentSession !== undefined, {
    error: "a session with origin 'subagent' needs a parentSession",
    path: ['parentSession'],
  })

/** One session of the live-preferred corpus (a listing record). */
export const sessionRecord = z.object({
  header: sessionHeader,
  /** The exact inherited cut: how many leading events came from the fork source. */
  inheritedEventCount: nonNegativeInt,
  live: z.boolean(),
  persisted: z.boolean(),
  /** The persisted revision, when persisted. */
  revision: z.string().optional(),
})

/**
 * One session of a listing: its record, then what the projection cache holds
 * of it. A listing reads no log for these: `null` is a value not cached yet
 * (a later fold fills it), a unit that failed, or, for `cost`, no price table
 * or a model without a price (never 0 in its place).
 */
export const sessionListEntry = sessionRecord.extend({
  /** The `sessionTitle` view: the session's own title, else the first prompt, else the one it inherited. */
  title: z.string().nullable(),
  /** Tokens of every kind the session's own suffix used (`sessionStats`). */
  tokens: nonNegativeInt.nullable(),
  /** USD under the reader's price table (`dsh sessions --prices`); a server holds none. */
  cost: z.number().nonnegative().nullable(),
  /** Why `cost` is `null`, when the reader knows (sent only beside a null cost). */
  costReason: listingCostReason.optional(),
})

/** Entries ordered by `createdAt`, then id; `nextCursor` continues the same filter. */
export const sessionListPage = z.object({
  sessions: z.array(sessionListEntry),
  nextCursor: z.string().optional(),
})

/** One stored event; `data` is lossless JSON. */
export const storedEvent = z.object({
  type: z.string().min(1),
  seq: nonNegativeInt,
  time: z.number(),
  data: jsonValue,
})

/** A page of history, ascending by seq; `nextBefore` continues towards the start of the log. */
export const historyPage = z.object({
  header: sessionHeader,
  inheritedEventCount: nonNegativeInt,
  events: z.array(storedEvent),
  nextBefore: nonNegativeInt.optional(),
  total: nonNegativeInt,
})

/** The list filter and cursor, as query parameters of `GET /api/sessions`. */
export const listSessionsQuery = z.object({
  parentSession: idParam.optional(),
  origin: choiceParam(['subagent']).optional(),
  cwd: textParam.optional(),
  /** Inclusive bounds on `header.createdAt` (epoch ms). */
  createdFrom: intParam(0, Number.MAX_SAFE_INTEGER).optional(),
  createdTo: intParam(0, Number.MAX_SAFE_INTEGER).optional(),
  limit: intParam(1, PAGE_MAX_LIMIT).optional(),
  /** Opaque, from `nextCursor` of a previous page of the same filter. */
  cursor: cursorParam.optional(),
})

/** Query parameters of the history routes. */
export const historyQuery = z.object({
  /** Events strictly before this seq (default: the end of the log). */
  before: intParam(0, Number.MAX_SAFE_INTEGER).optional(),
  limit: intParam(1, PAGE_MAX_LIMIT).optional(),
})
