import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * `@dsh/driver-openai/testing` — for tests only, never for production.
 *
 * The only fake in dsh's tests: a local HTTP server speaking the Chat
 * Completions protocol as the public API reference describes it — JSON
 * responses, SSE streams of `chat.completion.chunk` objects (`data: {...}`
 * frames ending with `data: [DONE]`), tool call deltas carrying
 * index/id/function.name and argument fragments, usage in a final chunk with
 * empty `choices` (`stream_options.include_usage`), `{ error: {...} }` bodies
 * and 429 with `retry-after`. It replays scripted replies; the real `openai`
 * client talks to it.
 */

export interface RecordedRequest {
  readonly method: string
  readonly url: string
  readonly headers: IncomingMessage['headers']
  readonly body: ChatRequestBody
}

export interface ChatRequestBody {
  readonly model: string
  readonly stream?: boolean
  readonly messages: readonly { role: string; content?: string | null; tool_calls?: unknown[]; tool_call_id?: string }[]
  readonly tools?: readonly { type: string; function: { name: string; description?: string; parameters?: unknown } }[]
  readonly stream_options?: { include_usage?: boolean }
}

export interface ToolCallScript {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

export type Reply =
  /** A streamed answer: reasoning deltas, content pieces, then tool calls (arguments split into fragments), then finish and usage. */
  | {
      readonly kind: 'stream'
      readonly reasoning?: readonly string[]
      readonly content?: readonly string[]
      readonly toolCalls?: readonly ToolCallScript[]
      readonly usage?: { readonly prompt: number; readonly completion: number }
      /** Stream this many content pieces, then stop writing and keep the connection open (to abort or kill mid-stream). */
      readonly hangAfter?: number
    }
  /** An HTTP error with an OpenAI-style `{ error }` body. */
  | {
      readonly kind: 'error'
      readonly status: number
      readonly message: string
      readonly type?: string
      readonly headers?: Readonly<Record<string, string>>
    }

export type Responder = (request: RecordedRequest, index: number) => Reply | undefined

export interface ModelServer {
  /** The base URL to give the client (`http://127.0.0.1:<port>/v1`). */
  readonly baseURL: string
  readonly requests: RecordedRequest[]
  /** Resolves when a reply with `hangAfter` has written its pieces (the nth hang, counting from 1). */
  hung(nth?: number): Promise<void>
  close(): Promise<void>
}

/** Serves `replies` in order (or asks `responder` per request); an unscripted request gets a 500 naming it. */
export async function startModelServer(script: readonly Reply[] | Responder): Promise<ModelServer> {
  const requests: RecordedRequest[] = []
  const responder: Responder = typeof script === 'function' ? script : (_request, index) => script[index]
  let hangs = 0
  const hangListeners: { nth: number; resolve: () => void }[] = []
  const open = new Set<ServerResponse>()

  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => parts.push(part))
    req.on('end', () => {
      open.add(res)
      res.on('close', () => open.delete(res))
      if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
        return json(res, 404, {
          error: { message: `No route ${req.method} ${req.url}`, type: 'invalid_request_error', param: null, code: null },
        })
      }
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as ChatRequestBody
      const request = { method: req.method, url: req.url, headers: req.headers, body }
      const index = requests.length
      requests.push(request)
      const reply = responder(request, index)
      if (reply === undefined)
        return json(res, 500, { error: { message: `unscripted request #${index}`, type: 'server_error', param: null, code: null } })
      if (reply.kind === 'error') {
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers })
        res.end(JSON.stringify({ error: { message: reply.message, type: reply.type ?? 'invalid_request_error', param: null, code: null } }))
        return
      }
      stream(res, body, reply, () => {
        hangs++
        for (const listener of hangListeners.filter((l) => l.nth === hangs)) listener.resolve()
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    hung(nth = 1) {
      if (hangs >= nth) return Promise.resolve()
      return new Promise((resolve) => hangListeners.push({ nth, resolve }))
    },
    async close() {
      for (const res of open) res.destroy()
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}

function stream(res: ServerResponse, request: ChatRequestBody, reply: Extract<Reply, { kind: 'stream' }>, onHang: () => void): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
  const base = {
    id: 'chatcmpl-test',
    object: 'chat.completion.chunk',
    created: 1_700_000_000,
    model: request.model,
    system_fingerprint: 'fp_test',
  }
  const send = (choices: unknown[], extra: Record<string, unknown> = {}): void => {
    res.write(`data: ${JSON.stringify({ ...base, choices, ...extra })}\n\n`)
  }
  const choice = (delta: Record<string, unknown>, finish: string | null = null): unknown => ({
    index: 0,
    delta,
    logprobs: null,
    finish_reason: finish,
  })
  send([choice({ role: 'assistant', content: '' })])
  for (const piece of reply.reasoning ?? []) send([choice({ reasoning_content: piece })])
  const content = reply.content ?? []
  for (let i = 0; i < content.length; i++) {
    if (reply.hangAfter !== undefined && i === reply.hangAfter) {
      onHang()
      return
    }
    send([choice({ content: content[i] })])
  }
  if (reply.hangAfter !== undefined && reply.hangAfter >= content.length) {
    onHang()
    return
  }
  const calls = reply.toolCalls ?? []
  calls.forEach((call, index) => {
    // An empty id is left out, as some servers do.
    send([
      choice({
        tool_calls: [{ index, ...(call.id === '' ? {} : { id: call.id }), type: 'function', function: { name: call.name, arguments: '' } }],
      }),
    ])
    // Arguments arrive in fragments, as real servers send them.
    for (let at = 0; at < call.arguments.length; at += 7) {
      send([choice({ tool_calls: [{ index, function: { arguments: call.arguments.slice(at, at + 7) } }] })])
    }
  })
  send([choice({}, calls.length > 0 ? 'tool_calls' : 'stop')])
  if (request.stream_options?.include_usage && reply.usage) {
    const { prompt, completion } = reply.usage
    send([], { usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })
  }
  res.write('data: [DONE]\n\n')
  res.end()
}

/** A streamed text answer split into pieces. */
export function answer(pieces: readonly string[], usage?: { prompt: number; completion: number }, reasoning?: readonly string[]): Reply {
  return { kind: 'stream', content: pieces, ...(usage === undefined ? {} : { usage }), ...(reasoning === undefined ? {} : { reasoning }) }
}

/** A streamed step that calls tools. */
export function callTools(calls: readonly ToolCallScript[], usage?: { prompt: number; completion: number }): Reply {
  return { kind: 'stream', toolCalls: calls, ...(usage === undefined ? {} : { usage }) }
}
