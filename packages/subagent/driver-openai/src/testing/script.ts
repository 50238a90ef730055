import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * What the test model server's protocols share: the scripted replies, the
 * record of a request, and the interface a protocol module implements
 * (`ModelProtocol`). The server (`model-server.ts`) routes each POST by its
 * path to the protocol that serves it.
 */

/** A recorded request. `body` is the parsed JSON; it is typed as the Chat body, the protocol most tests speak (narrow with `RecordedRequest<B>` for another). */
export interface RecordedRequest<Body = ChatRequestBody> {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage['headers']
  /** The name of the protocol whose route took the request (`chat`, `responses`, …). */
  readonly protocol: string
  readonly body: Body
}

export interface ChatRequestBody {
  readonly model: string
  readonly stream?: boolean
  /** `content` is typed as text; a message with images or files carries an array of parts there. */
  readonly messages: readonly { role: string; content?: string | null; tool_calls?: unknown[]; tool_call_id?: string }[]
  readonly tools?: readonly { type: string; function: { name: string; description?: string; parameters?: unknown } }[]
  readonly stream_options?: { include_usage?: boolean }
}

export interface ToolCallScript {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** Scripted usage in the protocol's overlapping terms: `cached` is part of `prompt`, `reasoning` part of `completion`. */
export interface ScriptedUsage {
  readonly prompt: number
  readonly completion: number
  readonly cached?: number
  readonly reasoning?: number
}

/** A streamed answer: reasoning deltas, content pieces, then tool calls (arguments split into fragments), then finish and usage. */
export interface StreamReply {
  readonly kind: 'stream'
  readonly reasoning?: readonly string[]
  readonly content?: readonly string[]
  readonly toolCalls?: readonly ToolCallScript[]
  readonly usage?: ScriptedUsage
  /** The finish reason sent, in the protocol's words (default: the protocol's tool-call reason when the reply calls tools, else its stop reason). */
  readonly finish?: string
  /** Stream this many content pieces, then stop writing and keep the connection open (to abort or kill mid-stream). */
  readonly hangAfter?: number
}

/** An HTTP error with the protocol's error body. */
export interface ErrorReply {
  readonly kind: 'error'
  readonly status: number
  readonly message: string
  readonly type?: string
  readonly headers?: Readonly<Record<string, string>>
}

/** A response written exactly as given, for what no protocol sends (garbage, a cut-off stream, far indices); status 200 and an event stream unless given. */
export interface RawReply {
  readonly kind: 'raw'
  readonly status?: number
  readonly contentType?: string
  /** Written in order, then the response ends. */
  readonly body: readonly string[]
  /** Milliseconds between two pieces of `body` (default: written at once). */
  readonly gapMs?: number
}

/**
 * A body of `bytes` bytes (`head`, then `fill` repeated, cut at `bytes`)
 * written only as fast as the client takes it, for what a client must stop
 * reading: the server records what it wrote (`ModelServer.flooded`).
 */
export interface FloodReply {
  readonly kind: 'flood'
  readonly status: number
  /** Default `application/json`. */
  readonly contentType?: string
  readonly headers?: Readonly<Record<string, string>>
  /** Written first (e.g. the start of the protocol's error object). */
  readonly head?: string
  /** Repeated after `head` (default `x`). */
  readonly fill?: string
  readonly bytes: number
}

/** What a flood reply wrote before its response closed: its bytes, and whether the client took them all. */
export interface FloodOutcome {
  readonly written: number
  readonly complete: boolean
}

export type Reply = StreamReply | ErrorReply | RawReply | FloodReply

export type Responder = (request: RecordedRequest, index: number) => Reply | undefined

/** An error as a protocol writes it into its own body shape. */
export interface ErrorDetail {
  readonly message: string
  readonly type: string
  readonly code?: string | null
  readonly param?: string | null
}

/** What a protocol hands back after streaming a reply. */
export interface StreamOutcome {
  /** The usage object sent (what `reported` records), or undefined when none was sent. */
  readonly usage: unknown
}

/**
 * One wire protocol of the test server. The server parses the body, records
 * the request, applies the context window, asks the responder, then calls
 * `error` or `stream` of the protocol whose `path` the URL ends with.
 */
export interface ModelProtocol {
  /** Recorded as `RecordedRequest.protocol` (`chat`, `responses`, `messages`). */
  readonly name: string
  /** The path the route ends with (`/chat/completions`, `/responses`, `/messages`). */
  readonly path: string
  /** The server's own token count of a request body (for `contextWindow`; independent of any dsh estimate). */
  tokens(body: unknown): number
  /** Writes an HTTP error in this protocol's body shape. */
  error(res: ServerResponse, status: number, detail: ErrorDetail, headers?: Readonly<Record<string, string>>): void
  /** A request the protocol refuses before any reply is asked for (e.g. an unknown `previous_response_id`): the status and error, or undefined. */
  refuse?(body: unknown): { readonly status: number; readonly detail: ErrorDetail } | undefined
  /** Streams `reply`; `onHang` is called when a `hangAfter` reply stops writing. */
  stream(res: ServerResponse, body: unknown, reply: StreamReply, onHang: () => void): StreamOutcome
}

/** A protocol entry of the server: the protocol, or a function making one per server (a protocol that keeps state, such as stored responses). */
export type ProtocolEntry = ModelProtocol | (() => ModelProtocol)

/** Counts words, digits and punctuation marks of `text`: the server's own token rule. */
export function countTokens(text: string): number {
  return text.match(/[A-Za-z]+|\d|[^\sA-Za-z\d]/g)?.length ?? 0
}

export function writeJson(res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

export function openEventStream(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
}

/** A streamed text answer split into pieces. */
export function answer(pieces: readonly string[], usage?: ScriptedUsage, reasoning?: readonly string[]): Reply {
  return { kind: 'stream', content: pieces, ...(usage === undefined ? {} : { usage }), ...(reasoning === undefined ? {} : { reasoning }) }
}

/** A streamed step that calls tools. */
export function callTools(calls: readonly ToolCallScript[], usage?: ScriptedUsage): Reply {
  return { kind: 'stream', toolCalls: calls, ...(usage === undefined ? {} : { usage }) }
}

/** Writes a flood reply, waiting on the socket's backpressure; `onClosed` gets what was written when the response closes. */
export function writeFlood(res: ServerResponse, reply: FloodReply, onClosed: (outcome: FloodOutcome) => void): void {
  const head = Buffer.from(reply.head ?? '')
  const fill = Buffer.from(reply.fill ?? 'x')
  const block = Buffer.alloc(Math.max(65_536, fill.length), fill)
  let written = 0
  res.on('close', () => onClosed({ written, complete: res.writableFinished }))
  res.writeHead(reply.status, { 'content-type': reply.contentType ?? 'application/json', ...reply.headers })
  const next = (): void => {
    while (!res.destroyed && written < reply.bytes) {
      const piece = written === 0 && head.length > 0 ? head : block
      const part = piece.subarray(0, reply.bytes - written)
      written += part.length
      if (!res.write(part)) return void res.once('drain', next)
    }
    if (!res.destroyed) res.end()
  }
  next()
}
