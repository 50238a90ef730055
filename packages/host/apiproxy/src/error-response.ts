import { isDshError, textWithin } from '@dsh/context'
import type { ErrorBody } from '@dsh/protocol'
import { ApiError } from './errors.js'

// Service codes the API passes through unchanged, with the status they mean
// on the wire. Codes not listed fall back to their suffix (below).
const SERVICE_STATUS: Readonly<Record<string, number>> = {
  SESSION_QUERY_NOT_FOUND: 404,
  SESSION_QUERY_INVALID_FILTER: 400,
  SESSION_QUERY_INVALID_CURSOR: 400,
  SESSION_QUERY_STALE_CURSOR: 409,
  SESSION_QUERY_CORRUPT_SESSION: 422,
  SESSION_QUERY_PERSISTENCE_FAILED: 503,
  SESSION_QUERY_INDEX_FAILED: 503,
  SESSION_QUERY_CLOSED: 503,
  SESSION_INVALID_ID: 400,
  CONTEXT_SERVICE_UNAVAILABLE: 503,
  // Another process holds the session's writer lock (a run, `dsh compact`): the action may succeed once it is done.
  SESSION_PERSISTENCE_LOCKED: 409,
  // A compaction of the session is under way already, or the context is too short to shadow anything (or to shrink by a summary).
  COMPACTION_BUSY: 409,
  COMPACTION_NOTHING_TO_COMPACT: 409,
  COMPACTION_NO_GAIN: 409,
  // The model behind the summarizer failed or answered nothing storable; the log records the attempt and the context is unchanged.
  COMPACTION_SUMMARIZER_FAILED: 502,
  // The host has a compaction service but no model to write summaries: its configuration, as API_COMPACTION_UNAVAILABLE.
  COMPACTION_NO_SUMMARIZER: 501,
  // Persistence did not take the session's events (its backend is down, its disk full); they stay in memory and a later flush retries.
  SESSION_FLUSH_FAILED: 503,
  // The caller went away; nobody reads this status, but logs should not call it a server fault.
  CANCELLED: 499,
}

const BUDGET_CODE = /_(BUDGET|BUDGET_EXCEEDED|TIMEOUT|TIMED_OUT|BUSY|OVERLOADED)$/

const SUFFIX_STATUS: ReadonlyArray<readonly [RegExp, number]> = [
  [/_NOT_FOUND$/, 404],
  [/_INVALID(_[A-Z]+)*$/, 400],
  [/_(UNAUTHORIZED|FORBIDDEN|NOT_RESUMABLE)$/, 403],
  [/_(CONFLICT|LOCKED)$/, 409],
  [/_CORRUPT(_[A-Z]+)*$/, 422],
  // A statement that ran out of its time budget, or a backend too busy to start one: the request may succeed later.
  [BUDGET_CODE, 503],
  [/_UNAVAILABLE$/, 503],
]

/** 5xx answers that are the host's configuration working as intended, not faults to log. */
const EXPECTED_REFUSALS: ReadonlySet<string> = new Set([
  'API_SEARCH_UNAVAILABLE',
  'API_COMPACTION_UNAVAILABLE',
  'COMPACTION_NO_SUMMARIZER',
  'API_TOO_MANY_STREAMS',
  'API_BUSY',
])

/**
 * 5xx service codes whose message is written for the caller and keeps it on
 * the wire: it says what the model server answered (already redacted of the
 * API key and bounded by the driver) or what the host lacks, and names none
 * of the host's files. The caller can act on it (retry, fix the model
 * configuration).
 */
const TOLD_FAILURES: ReadonlySet<string> = new Set(['COMPACTION_SUMMARIZER_FAILED', 'COMPACTION_NO_SUMMARIZER'])

/**
 * The most characters of a service's message an error answer carries (an
 * ellipsis, counted, marks a cut): a message can quote what a model server sent, and
 * an answer is no place for a whole upstream body.
 */
export const ERROR_MESSAGE_MAX_CHARS = 1_000

export interface ErrorResponse {
  readonly status: number
  readonly body: ErrorBody
  /** True for faults the host should log as errors (anything that is not the caller's mistake). */
  readonly serverFault: boolean
  /** True when the wire message is a fixed one and the original (with its details) belongs in the server log. */
  readonly redacted: boolean
}

/**
 * Turns anything thrown by a handler into a typed `{ code, message }` answer.
 * The host's own messages are written for callers. A service error of a
 * caller's mistake (4xx) keeps its message, built from the request, and so
 * does a failure of the model behind a compaction (see `TOLD_FAILURES`),
 * both bounded. A damaged entry (422) or a failing backend (5xx) keeps its
 * code, but its message is replaced by a fixed one: those messages name
 * files, byte offsets and errno codes, which stay in the server log.
 * Anything else is `API_INTERNAL`.
 */
export function toErrorResponse(error: unknown): ErrorResponse {
  if (error instanceof ApiError) {
    return {
      status: error.status,
      body: error.toJSON(),
      serverFault: error.status >= 500 && !EXPECTED_REFUSALS.has(error.code),
      redacted: false,
    }
  }
  if (isDshError(error)) {
    const status = serviceStatus(error.code)
    if (status < 500 && status !== 422)
      return { status, body: { code: error.code, message: bounded(error.message) }, serverFault: false, redacted: false }
    if (TOLD_FAILURES.has(error.code))
      return {
        status,
        body: { code: error.code, message: bounded(error.message) },
        serverFault: !EXPECTED_REFUSALS.has(error.code),
        redacted: false,
      }
    return {
      status,
      body: { code: error.code, message: fixedMessage(status, error.code, error.details?.id) },
      // A request stopped by its budget is the host's limit working as intended: logged as a refusal, not a fault.
      serverFault: status >= 500 && !BUDGET_CODE.test(error.code),
      redacted: true,
    }
  }
  return {
    status: 500,
    body: { code: 'API_INTERNAL', message: 'The host failed to answer this request; its log has the details.' },
    serverFault: true,
    redacted: true,
  }
}

/** A service's message as an answer carries it: at most {@link ERROR_MESSAGE_MAX_CHARS} characters, the ellipsis included. */
const bounded = (message: string): string => textWithin(message, ERROR_MESSAGE_MAX_CHARS)

/** The HTTP status a service's error code means on the wire. */
function serviceStatus(code: string): number {
  return SERVICE_STATUS[code] ?? SUFFIX_STATUS.find(([pattern]) => pattern.test(code))?.[1] ?? 500
}

/**
 * A problem of one session inside an answer (a gap of a stats rollup), by
 * the rule of an error answer: a caller's mistake keeps its message; a
 * damaged session's, a failing backend's or an uncoded one's is replaced by
 * a fixed message (they name files, byte offsets and errno codes).
 */
export function wireProblem(problem: { readonly code?: string; readonly message: string }): { code?: string; message: string } {
  if (problem.code === undefined) return { message: fixedMessage(500, '', undefined) }
  const status = serviceStatus(problem.code)
  if (status < 500 && status !== 422) return { code: problem.code, message: bounded(problem.message) }
  return { code: problem.code, message: fixedMessage(status, problem.code, undefined) }
}

function fixedMessage(status: number, code: string, id: unknown): string {
  if (BUDGET_CODE.test(code))
    return 'The query ran out of the time this host gives one request; ask for less (fewer or rarer search words, a smaller page) or retry later.'
  const session = typeof id === 'string' ? `Session '${id}'` : 'A session this request needs'
  if (status === 422) return `${session} is damaged and cannot be served; the host's log names the fault, and 'dsh verify' reports it.`
  if (status === 503) return "The host's storage or index could not answer this request now; retry later. The host's log has the details."
  return "The host failed to answer this request; the host's log has the details."
}
