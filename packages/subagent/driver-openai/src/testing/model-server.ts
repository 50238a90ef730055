import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type ChatUsage, chatProtocol } from './chat-protocol.js'
import { messagesProtocol } from './messages-protocol.js'
import { responsesProtocol } from './responses-protocol.js'
import {
  type FloodOutcome,
  type ModelProtocol,
  type ProtocolEntry,
  type RecordedRequest,
  type Reply,
  type Responder,
  writeFlood,
  writeJson,
} from './script.js'

/**
 * `@dsh/driver-openai/testing` — for tests only, never for production.
 *
 * The only fake in dsh's tests: a local HTTP server speaking the model
 * protocols as their public API references describe them, routed by path
 * (`PROTOCOLS`): Chat Completions (`/v1/chat/completions`,
 * `chat-protocol.ts`) and Responses (`/v1/responses`,
 * `responses-protocol.ts`). It replays scripted replies (or asks a responder per
 * request); the real SDK clients talk to it. It records every request with
 * the protocol whose route took it.
 *
 * Every completed stream that asks for usage reports it, in the protocol's
 * own overlapping terms (Chat: the prompt count includes the cached tokens,
 * the completion count the reasoning tokens). A reply without scripted usage
 * gets usage derived from the request and the reply (see `derivedUsage`).
 * The server keeps its own record of every usage object it sent
 * (`reported`), so a test can check what dsh stored against what the server
 * said.
 */

export type { ChatUsage } from './chat-protocol.js'
export { derivedUsage, serverTokenCount } from './chat-protocol.js'
export type { MessagesRequestBody, MessagesUsage } from './messages-protocol.js'
export { messagesTokenCount, thinkingSignature } from './messages-protocol.js'
export type { ResponsesRequestBody } from './responses-protocol.js'
export { responsesTokenCount } from './responses-protocol.js'
export type {
  ChatRequestBody,
  ErrorDetail,
  ErrorReply,
  FloodOutcome,
  FloodReply,
  ModelProtocol,
  ProtocolEntry,
  RawReply,
  RecordedRequest,
  Reply,
  Responder,
  ScriptedUsage,
  StreamOutcome,
  StreamReply,
  ToolCallScript,
} from './script.js'
export { answer, callTools } from './script.js'

/** The protocols the server speaks, by the path their route ends with. */
const PROTOCOLS: readonly ProtocolEntry[] = [chatProtocol, responsesProtocol, messagesProtocol]

/** One usage report: which request (0-based, in arrival order), on which protocol, and what was sent (typed as Chat's usage; narrow with `ReportedUsage<U>` for another protocol). */
export interface ReportedUsage<Usage = ChatUsage> {
  readonly request: number
  readonly protocol: string
  readonly model: string
  readonly usage: Usage
}

export interface ModelServer {
  /** The base URL to give the client (`http://127.0.0.1:<port>/v1`). */
  readonly baseURL: string
  /** Every request, in arrival order, whatever its route. */
  readonly requests: RecordedRequest[]
  /** Every usage object the server sent, in order: the server's own record of what it reported. */
  readonly reported: ReportedUsage[]
  /** Resolves when a reply with `hangAfter` has written its pieces (the nth hang, counting from 1). */
  hung(nth?: number): Promise<void>
  /** Resolves when the nth flood reply's response has closed (counting from 1), with what it wrote. */
  flooded(nth?: number): Promise<FloodOutcome>
  close(): Promise<void>
}

export interface ModelServerOptions {
  /**
   * The model's window in the server's own tokens (each protocol's `tokens`):
   * a request over it gets 400 `context_length_exceeded`, as providers answer.
   */
  readonly contextWindow?: number
}

function protocolOf(protocols: readonly ModelProtocol[], method: string | undefined, url: string | undefined): ModelProtocol | undefined {
  if (method !== 'POST' || url === undefined) return undefined
  const path = url.split('?')[0] ?? ''
  return protocols.find((protocol) => path.endsWith(protocol.path))
}

/** Serves `replies` in order (or asks `responder` per request); an unscripted request gets a 500 naming it. */
export async function startModelServer(script: readonly Reply[] | Responder, options: ModelServerOptions = {}): Promise<ModelServer> {
  const requests: RecordedRequest[] = []
  const reported: ReportedUsage[] = []
  const responder: Responder = typeof script === 'function' ? script : (_request, index) => script[index]
  let hangs = 0
  const hangListeners: { nth: number; resolve: () => void }[] = []
  const floods: FloodOutcome[] = []
  const floodListeners: { nth: number; resolve: (outcome: FloodOutcome) => void }[] = []
  const open = new Set<ServerResponse>()
  const protocols = PROTOCOLS.map((entry) => (typeof entry === 'function' ? entry() : entry))

  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => parts.push(part))
    req.on('end', () => {
      open.add(res)
      res.on('close', () => open.delete(res))
      const protocol = protocolOf(protocols, req.method, req.url)
      if (protocol === undefined) {
        return writeJson(res, 404, {
          error: { message: `No route ${req.method} ${req.url}`, type: 'invalid_request_error', param: null, code: null },
        })
      }
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as RecordedRequest['body']
      const request: RecordedRequest = { method: 'POST', url: req.url ?? '', headers: req.headers, protocol: protocol.name, body }
      const index = requests.length
      requests.push(request)
      const tokens = options.contextWindow === undefined ? 0 : protocol.tokens(body)
      if (options.contextWindow !== undefined && tokens > options.contextWindow) {
        const message = `This model's maximum context length is ${options.contextWindow} tokens. However, your messages resulted in ${tokens} tokens. Please reduce the length of the messages.`
        return protocol.error(res, 400, { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' })
      }
      const refused = protocol.refuse?.(body)
      if (refused !== undefined) return protocol.error(res, refused.status, refused.detail)
      const reply = responder(request, index)
      if (reply === undefined) return protocol.error(res, 500, { message: `unscripted request #${index}`, type: 'server_error' })
      if (reply.kind === 'error') {
        return protocol.error(res, reply.status, { message: reply.message, type: reply.type ?? 'invalid_request_error' }, reply.headers)
      }
      if (reply.kind === 'flood') {
        return writeFlood(res, reply, (outcome) => {
          floods.push(outcome)
          for (const listener of floodListeners.filter((l) => l.nth === floods.length)) listener.resolve(outcome)
        })
      }
      if (reply.kind === 'raw') {
        res.writeHead(reply.status ?? 200, { 'content-type': reply.contentType ?? 'text/event-stream' })
        if (reply.gapMs === undefined) {
          for (const piece of reply.body) res.write(piece)
          return res.end()
        }
        const pieces = [...reply.body]
        const next = (): void => {
          if (res.destroyed) return
          const piece = pieces.shift()
          if (piece === undefined) return void res.end()
          res.write(piece)
          setTimeout(next, reply.gapMs)
        }
        return next()
      }
      const { usage } = protocol.stream(res, body, reply, () => {
        hangs++
        for (const listener of hangListeners.filter((l) => l.nth === hangs)) listener.resolve()
      })
      if (usage !== undefined) reported.push({ request: index, protocol: protocol.name, model: body.model, usage: usage as ChatUsage })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    reported,
    hung(nth = 1) {
      if (hangs >= nth) return Promise.resolve()
      return new Promise((resolve) => hangListeners.push({ nth, resolve }))
    },
    flooded(nth = 1) {
      const outcome = floods[nth - 1]
      if (outcome !== undefined) return Promise.resolve(outcome)
      return new Promise((resolve) => floodListeners.push({ nth, resolve }))
    },
    async close() {
      for (const res of open) res.destroy()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  }
}
