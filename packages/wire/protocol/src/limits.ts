// The one set of request limits. The HTTP host refuses past them, the client
// refuses to send past them, and query backends may import them so that every
// layer answers the same request the same way.

/** Longest search text, in UTF-16 code units, before any normalisation. */
export const SEARCH_MAX_TEXT = 1000

/**
 * Most distinct search terms in one request. Repeated words count once; the
 * cost of a full-text query grows with its terms, so the cap bounds it.
 */
export const SEARCH_MAX_TERMS = 16

/** Largest page of search hits a caller may ask for. */
export const SEARCH_PAGE_MAX_LIMIT = 100

/** Page of search hits when the caller names no `limit`. */
export const SEARCH_PAGE_DEFAULT_LIMIT = 20

/** Largest page of sessions or history events a caller may ask for. */
export const PAGE_MAX_LIMIT = 1000

/** Page of sessions or history events when the caller names no `limit`. */
export const PAGE_DEFAULT_LIMIT = 100

/**
 * Longest session id, in UTF-16 code units (after percent-decoding, on a
 * route): every route refuses a longer one, and every persistence backend
 * refuses to store one (`SESSION_PERSISTENCE_INVALID_ID`), so no id is
 * stored that the wire cannot name.
 */
export const ID_MAX_LENGTH = 1024

/**
 * Why `id` cannot name a session on the wire, as the end of a sentence about
 * it (undefined: it can). Routes refuse such an id, and every persistence
 * backend refuses to store one, by this one rule:
 * - empty, or longer than `ID_MAX_LENGTH`;
 * - `.` or `..`: HTTP clients and proxies resolve dot segments before a
 *   request arrives, so a path cannot name it reliably;
 * - a NUL character;
 * - a lone surrogate: it has no UTF-8 form, so no percent-encoding.
 */
export function idFault(id: string): string | undefined {
  if (id.length === 0) return 'is empty'
  if (id.length > ID_MAX_LENGTH) return `is longer than ${ID_MAX_LENGTH} characters`
  if (id === '.' || id === '..') return 'is a dot segment, which HTTP clients rewrite; such an id cannot be addressed by path'
  if (id.includes('\u0000')) return 'contains a NUL character'
  // In a `u` regular expression a surrogate pair is one code point: `\p{Cs}` matches only a lone half.
  if (/\p{Cs}/u.test(id)) return 'contains a lone surrogate, which has no UTF-8 form'
  return undefined
}

/** Longest free-text query parameter (a cwd), after percent-decoding. */
export const PARAM_MAX_LENGTH = 4096

/**
 * Longest page cursor a backend issues or accepts, and every route and tool
 * takes. A listing cursor carries the last session's id as base64url of its
 * JSON: at most 6 bytes per UTF-16 unit escaped, so the longest id
 * (`ID_MAX_LENGTH`) makes about 8,300 characters, and this leaves room.
 */
export const CURSOR_MAX_LENGTH = 16_384

// ---------------------------------------------------------------------------
// Sizes: what one stored event, one stored line, one v0 frame and one history
// page may cost. Every persistence backend refuses past the append caps with a
// typed code; every reader of stored lines measures a line before it loads it,
// and hands back a line over the read cap as an elided event (below), in
// memory bounded by the cap, never the line whole.

/**
 * Largest event an append stores: the UTF-8 bytes of its encoded line (the
 * JSON of `{type, seq, time, data}`). Past it a backend refuses the batch
 * with `SESSION_PERSISTENCE_EVENT_TOO_LARGE` and stores none of it; large
 * content belongs in an attachment, referenced from the event. `Session.append`
 * refuses such an event before it is logged (`SESSION_EVENT_TOO_LARGE`,
 * against the same number in `@dsh/session/limits`).
 */
export const EVENT_MAX_BYTES = 16 * 1024 * 1024

/**
 * Longest stored line a reader loads: UTF-8 bytes of one line of a log (one
 * event, or one packed run of events), without its newline. A longer line is
 * never materialized whole: persistence reads return it as an elided event
 * (`ELIDED_EVENT_TYPE`), a v0 import refuses it (`IMPORT_V0_LINE_TOO_LARGE`).
 * At least `EVENT_MAX_BYTES`, so every event an append accepts reads back.
 */
export const LINE_MAX_BYTES = 32 * 1024 * 1024

/**
 * Largest plaintext one v0 zstd frame (one harness append batch) may
 * decompress to. The import stream-decompresses with this cap and refuses a
 * frame past it (`IMPORT_V0_FRAME_TOO_LARGE`): a frame of zeros a few
 * kilobytes long can stand for gigabytes.
 */
export const V0_FRAME_MAX_BYTES = 128 * 1024 * 1024

/**
 * Largest history page in bytes: the UTF-8 bytes of the JSON of its events.
 * A page stops adding older events before it would pass this (its
 * `nextBefore` continues from there); an event that alone is larger is
 * answered as an elided event. Equal to `EVENT_MAX_BYTES`: every storable
 * event fits a page alone.
 */
export const HISTORY_PAGE_MAX_BYTES = EVENT_MAX_BYTES

/**
 * The type of an event that stands in for one too large to hand back: it
 * keeps the original's `seq` (and `time`, when the reader could see it), and
 * its `data` is `ElidedEventData`. Folds and renderers that do not know the
 * type pass over it, as over any unknown event.
 */
export const ELIDED_EVENT_TYPE = 'event/elided'

/**
 * Why an event was elided: `line-too-large` — its stored line is over
 * `LINE_MAX_BYTES` (a persistence read); `page-too-large` — it alone is over
 * `HISTORY_PAGE_MAX_BYTES` (an HTTP history page).
 */
export type ElidedReason = 'line-too-large' | 'page-too-large'

/** The `data` of an elided event (a type alias, not an interface: it is JSON, so it fits any JSON-valued field). */
export type ElidedEventData = {
  readonly elided: {
    /** UTF-8 bytes of what was elided: the stored line, or the event's JSON. */
    readonly bytes: number
    readonly reason: ElidedReason
    /** The original event's type, when the reader could see it (`null` otherwise). */
    readonly type: string | null
  }
}

/** The elided event standing in for event `seq`. */
export function elidedEvent(
  seq: number,
  time: number,
  elided: ElidedEventData['elided'],
): { type: typeof ELIDED_EVENT_TYPE; seq: number; time: number; data: ElidedEventData } {
  return { type: ELIDED_EVENT_TYPE, seq, time, data: { elided: { bytes: elided.bytes, reason: elided.reason, type: elided.type } } }
}

/**
 * The distinct terms of a search text, in first-seen order: maximal runs of
 * letters and digits, lower-cased. Everything else separates terms, so no
 * input can carry query syntax. This is the one tokenisation every layer
 * applies; `SEARCH_MAX_TERMS` counts its result.
 */
export function searchTerms(text: string): string[] {
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])]
}

// ---------------------------------------------------------------------------
// HTTP connections: how many one host holds open and for how long. These are
// the defaults of `@dsh/apiproxy`'s server limits (each can be set per server);
// together they bound the sockets and file descriptors a host spends on
// clients that connect and then send nothing, send slowly, or stay idle.

/** Milliseconds an idle keep-alive connection is held between requests before the server closes it. */
export const HTTP_IDLE_TIMEOUT_MS = 5_000

/**
 * Milliseconds a client has to send a request's headers, counted from the
 * connection (or from the first byte of a later request on it); past it the
 * server answers `408` and closes the connection.
 */
export const HTTP_HEADERS_TIMEOUT_MS = 15_000

/** Milliseconds a client has to send a whole request, headers and body; past it `408` and close. Never below the headers timeout. */
export const HTTP_REQUEST_TIMEOUT_MS = 30_000

/** Connections one server holds open at once; each one over it is answered `503` (with `Retry-After`) and closed. */
export const HTTP_MAX_CONNECTIONS = 256

/** Seconds a client refused for too many connections is told to wait (`Retry-After`). */
export const HTTP_RETRY_AFTER_SECONDS = 1

// ---------------------------------------------------------------------------
// MCP serving: what one `dsh mcp` server takes from its client. These are the
// defaults of `@dsh/mcp`'s limits (each can be set per server: `dsh mcp
// --max-message-bytes`, `--max-children`, `--max-concurrent-runs`); together
// they bound the memory a client's messages hold and the runs its control
// calls start.

/**
 * Largest JSON-RPC message a stdio server reads: one line of stdin, in bytes,
 * without its newline. A longer line is skipped unread (memory stays at this
 * bound) and answered with a JSON-RPC error naming the cap.
 */
export const MCP_MAX_MESSAGE_BYTES = 10 * 1024 * 1024

/** Subagent children one parent session may have before the control tools refuse to start another for it. */
export const MCP_MAX_CHILDREN = 64

/**
 * Child runs the control tools of one server keep going at once: a run
 * counts from its start (`subagent`, or `send_message` to an idle child) until
 * the child has no turn running and no message queued.
 */
export const MCP_MAX_CONCURRENT_RUNS = 8

/**
 * Read-tool calls one MCP server answers at once (the HTTP host's
 * `maxConcurrentRequests`); more wait their turn in arrival order.
 */
export const MCP_MAX_CONCURRENT_READS = 8

/** Read-tool calls that may wait for a turn; one more is refused (`MCP_BUSY`) with nothing read. */
export const MCP_MAX_WAITING_READS = 64
