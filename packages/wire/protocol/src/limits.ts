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

/** Longest session id a route accepts, in UTF-16 code units after percent-decoding. */
export const ID_MAX_LENGTH = 1024

/** Longest free-text query parameter (a cwd, a cursor), after percent-decoding. */
export const PARAM_MAX_LENGTH = 4096

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
