import type { Readable, Writable } from 'node:stream'
import { escapeTerminal } from '@dsh/context'
import { MCP_MAX_MESSAGE_BYTES } from '@dsh/protocol/limits'
import type { Server } from '@modelcontextprotocol/sdk/server/index.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ErrorCode, type JSONRPCMessage, JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js'
import { McpError } from './errors.js'
import { type MessageId, MessageIdScanner } from './message-id.js'

const NEWLINE = 0x0a

/** Why a line of input was answered with an error instead of being served. */
export type McpRefusalCode =
  /** Longer than `maxMessageBytes`: skipped unread, answered `-32600` under its top-level id when one was found. */
  | 'MCP_MESSAGE_TOO_LARGE'
  /** Not JSON: answered `-32700` without an id. */
  | 'MCP_PARSE_ERROR'
  /** JSON, but not a JSON-RPC message: answered `-32600`. */
  | 'MCP_INVALID_MESSAGE'

/** One refused line, as the transport reports it (the client got `message` in a JSON-RPC error). */
export interface McpRefusal {
  readonly code: McpRefusalCode
  /** What the client was told; an excerpt of its line in it is bounded and its control characters escaped. */
  readonly message: string
  /** The request id the error answered, when the line had one at its top level. */
  readonly id?: MessageId
  /** Bytes in the line, without its newline. */
  readonly bytes: number
}

export interface BoundedStdioOptions {
  readonly stdin?: Readable
  readonly stdout?: Writable
  /** Longest line read, in bytes (default `MCP_MAX_MESSAGE_BYTES`, 10 MiB); a positive integer. */
  readonly maxMessageBytes?: number
  /** Called once per refused line, after its error is queued for the client. */
  readonly onRefusal?: (refusal: McpRefusal) => void
}

/** Checks a `maxMessageBytes` option: a positive safe integer, else `MCP_INVALID_OPTIONS`. */
export function messageCap(value: number | undefined): number {
  if (value === undefined) return MCP_MAX_MESSAGE_BYTES
  if (!Number.isSafeInteger(value) || value < 1)
    throw new McpError('MCP_INVALID_OPTIONS', `maxMessageBytes must be a positive integer, got ${String(value)}.`)
  return value
}

/**
 * The MCP stdio transport (newline-delimited JSON-RPC on stdin/stdout) with a
 * bound on what one message may hold in memory. A line longer than
 * `maxMessageBytes` is never buffered past the cap: its bytes are only
 * scanned for the top-level `id` as they pass, and once its newline arrives
 * the client gets a JSON-RPC error (`-32600`, `data.code`
 * `MCP_MESSAGE_TOO_LARGE`, the cap in the message) under that id. A line that
 * is not JSON gets `-32700`, one that is not JSON-RPC `-32600`. Every refusal
 * is reported to `onRefusal`, and the lines after it are served as usual.
 */
export class BoundedStdioServerTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void

  readonly #stdin: Readable
  readonly #stdout: Writable
  readonly #max: number
  readonly #onRefusal: ((refusal: McpRefusal) => void) | undefined
  #started = false
  /** The current line's pieces, while it is within the cap. */
  #parts: Buffer[] = []
  /** Bytes of the current line so far, counted past the cap too. */
  #size = 0
  /** Set once the current line passed the cap: its bytes go here and nowhere else. */
  #skipping: MessageIdScanner | undefined

  constructor(options: BoundedStdioOptions = {}) {
    this.#stdin = options.stdin ?? process.stdin
    this.#stdout = options.stdout ?? process.stdout
    this.#max = messageCap(options.maxMessageBytes)
    this.#onRefusal = options.onRefusal
  }

  async start(): Promise<void> {
    if (this.#started) throw new McpError('MCP_INVALID_OPTIONS', 'This stdio transport is already started; a server connects it once.')
    this.#started = true
    this.#stdin.on('data', this.#ondata)
    this.#stdin.on('error', this.#onStdinError)
  }

  async close(): Promise<void> {
    this.#stdin.off('data', this.#ondata)
    this.#stdin.off('error', this.#onStdinError)
    if (this.#stdin.listenerCount('data') === 0) this.#stdin.pause()
    this.#parts = []
    this.#skipping = undefined
    this.#size = 0
    this.onclose?.()
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.#stdout.write(`${JSON.stringify(message)}\n`)) resolve()
      else this.#stdout.once('drain', resolve)
    })
  }

  readonly #onStdinError = (error: Error): void => {
    this.onerror?.(error)
  }

  readonly #ondata = (chunk: Buffer | string): void => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    let start = 0
    for (;;) {
      const end = data.indexOf(NEWLINE, start)
      this.#take(data.subarray(start, end === -1 ? data.length : end))
      if (end === -1) return
      this.#endLine()
      start = end + 1
    }
  }

  #take(piece: Buffer): void {
    if (piece.length === 0) return
    this.#size += piece.length
    if (this.#skipping !== undefined) {
      this.#skipping.feed(piece)
      return
    }
    if (this.#size <= this.#max) {
      this.#parts.push(piece)
      return
    }
    const scanner = new MessageIdScanner()
    for (const part of this.#parts) scanner.feed(part)
    scanner.feed(piece)
    this.#parts = []
    this.#skipping = scanner
  }

  #endLine(): void {
    const size = this.#size
    const parts = this.#parts
    const skipped = this.#skipping
    this.#parts = []
    this.#size = 0
    this.#skipping = undefined
    if (skipped !== undefined) {
      this.#refuse('MCP_MESSAGE_TOO_LARGE', ErrorCode.InvalidRequest, tooLarge(size, this.#max), skipped.id, size)
      return
    }
    const line = Buffer.concat(parts).toString('utf8')
    if (line.trim().length === 0) return
    this.#dispatch(line, size)
  }

  #dispatch(line: string, size: number): void {
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch (error) {
      // The parser's message quotes the line: kept to a bounded excerpt with its controls escaped.
      const why = escapeTerminal(error instanceof Error ? error.message : String(error), { max: EXCERPT_ECHO_MAX_CHARS })
      this.#refuse(
        'MCP_PARSE_ERROR',
        ErrorCode.ParseError,
        `This line is not JSON (${why}); send one JSON-RPC message per line.`,
        undefined,
        size,
      )
      return
    }
    const parsed = JSONRPCMessageSchema.safeParse(value)
    if (!parsed.success) {
      const id = (value as { id?: unknown } | null)?.id
      this.#refuse(
        'MCP_INVALID_MESSAGE',
        ErrorCode.InvalidRequest,
        'This line is JSON but not a JSON-RPC 2.0 message (a request, notification or response with "jsonrpc": "2.0").',
        typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : undefined,
        size,
      )
      return
    }
    try {
      this.onmessage?.(parsed.data)
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)))
    }
  }

  #refuse(code: McpRefusalCode, rpcCode: number, message: string, id: MessageId | undefined, bytes: number): void {
    const text = `${code}: ${message}`
    const answer = {
      jsonrpc: '2.0' as const,
      ...(id === undefined ? {} : { id }),
      error: { code: rpcCode, message: text, data: { code, bytes, ...(code === 'MCP_MESSAGE_TOO_LARGE' ? { limit: this.#max } : {}) } },
    }
    this.send(answer as JSONRPCMessage).catch((error: unknown) => this.onerror?.(error instanceof Error ? error : new Error(String(error))))
    this.#onRefusal?.({ code, message: text, bytes, ...(id === undefined ? {} : { id }) })
  }
}

function tooLarge(bytes: number, max: number): string {
  return `This message is ${bytes} bytes, over this server's cap of ${max} bytes per message (maxMessageBytes; dsh mcp --max-message-bytes N); it was skipped unread. Send less in one call (split the input over several calls), or start the server with a higher cap.`
}

/** Longest excerpt of a client's line (the parser's message quoting it) said on stderr, in UTF-16 code units before escaping. */
const EXCERPT_ECHO_MAX_CHARS = 200
/** Longest request id said on stderr, in characters of its JSON (an id read from a line that is not JSON-RPC may be of any length). */
const ID_ECHO_MAX_CHARS = 80
/** Longest refusal message said on stderr: the transport's own words and a bounded excerpt fit well within it. */
const MESSAGE_ECHO_MAX_CHARS = 2048

export interface ServeStdioOptions extends Omit<BoundedStdioOptions, 'onRefusal'> {
  /** Where each refused line is said, one line each (default `process.stderr`). */
  readonly stderr?: Writable
}

/**
 * Serves `server` on stdin/stdout (this process's by default) until the
 * client disconnects; resolves when it has. Messages are bounded by
 * `maxMessageBytes`; each refused line is also said on `stderr`, one line
 * each, with the client's text in it (the id, an excerpt of the line) escaped
 * and bounded (`escapeTerminal` of `@dsh/context`).
 */
export async function serveStdio(server: Server, options: ServeStdioOptions = {}): Promise<void> {
  const stdin = options.stdin ?? process.stdin
  const stderr = options.stderr ?? process.stderr
  const transport = new BoundedStdioServerTransport({
    ...options,
    stdin,
    onRefusal: (refusal) => {
      // The id and the message carry the client's text: escaped and bounded, so a refused line cannot drive the terminal.
      const answered =
        refusal.id === undefined
          ? 'answered without an id'
          : `answered request ${escapeTerminal(JSON.stringify(refusal.id), { max: ID_ECHO_MAX_CHARS })}`
      stderr.write(
        `dsh: refused a ${refusal.bytes}-byte MCP message (${answered}): ${escapeTerminal(refusal.message, { max: MESSAGE_ECHO_MAX_CHARS })}\n`,
      )
    },
  })
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve()
  })
  await server.connect(transport)
  stdin.once('end', () => void server.close())
  await closed
}
