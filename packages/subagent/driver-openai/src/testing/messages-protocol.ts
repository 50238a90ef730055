import { createHash, randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import { countTokens, type ErrorDetail, type ModelProtocol, openEventStream, type StreamReply, writeJson } from './script.js'

/**
 * The Anthropic Messages protocol of the test server (`POST /v1/messages`),
 * as the public API reference describes it: SSE frames `event: <type>` +
 * `data: {...}` — `message_start` (with the input usage), per content block
 * `content_block_start`, `content_block_delta` (`thinking_delta` then one
 * `signature_delta`, `text_delta`, `input_json_delta` fragments of a
 * `tool_use`), `content_block_stop`, then `message_delta` (stop reason and
 * the final usage) and `message_stop`; errors as
 * `{type: 'error', error: {type, message}}` (429 `rate_limit_error`, 529
 * `overloaded_error`, …).
 *
 * Like the real API, it checks what comes back to it:
 * - a `thinking` block must carry the signature the server gave that text
 *   (`thinkingSignature`), else 400 — so a test sees signatures round-trip;
 * - with `thinking` enabled, an assistant message whose tool calls the last
 *   user message answers must start with its thinking block, else 400.
 *
 * Prompt caching is modelled per server: each `cache_control` breakpoint
 * writes the prefix up to and including its block (tools, then system, then
 * messages). A request reads the longest prefix written before that ends
 * at a breakpoint or up to 20 blocks before one
 * (`cache_read_input_tokens`), writes the rest up to its last breakpoint
 * (`cache_creation_input_tokens`), and the remainder is `input_tokens` —
 * the three disjoint, as the protocol has them. A reply with
 * scripted usage reports `prompt - cached` as input and `cached` as read. The
 * output count includes the thinking tokens (`output_tokens_details`).
 */

type Block = {
  readonly type: string
  readonly text?: string
  readonly thinking?: string
  readonly signature?: string
  readonly name?: string
  readonly input?: unknown
  readonly content?: unknown
  readonly cache_control?: unknown
}

/** A Messages request body as the server reads it. */
export interface MessagesRequestBody {
  readonly model: string
  readonly max_tokens: number
  readonly stream?: boolean
  readonly system?: string | readonly Block[]
  readonly messages: readonly { readonly role: string; readonly content: string | readonly Block[] }[]
  readonly tools?: readonly { readonly name: string; readonly description?: string; readonly input_schema?: unknown }[]
  readonly thinking?: { readonly type: string; readonly budget_tokens?: number }
}

/** A usage object exactly as the server sent it in `message_delta` (the final counts). */
export interface MessagesUsage {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_input_tokens: number
  readonly cache_creation_input_tokens: number
  readonly output_tokens_details: { readonly thinking_tokens: number }
}

/** The signature the server gives a thinking text, and the only one it accepts back for it. */
export function thinkingSignature(thinking: string): string {
  return `sig_${createHash('sha256').update(`dsh-test-server:${thinking}`).digest('base64url')}`
}

const blocksOf = (content: string | readonly Block[] | undefined): readonly Block[] =>
  content === undefined ? [] : typeof content === 'string' ? [{ type: 'text', text: content }] : content

function blockText(block: Block): string {
  if (block.type === 'text') return block.text ?? ''
  if (block.type === 'thinking') return block.thinking ?? ''
  if (block.type === 'tool_use') return `${block.name ?? ''}${JSON.stringify(block.input ?? {})}`
  if (block.type === 'tool_result') return typeof block.content === 'string' ? block.content : JSON.stringify(block.content ?? '')
  return JSON.stringify(block)
}

/** One cacheable piece of the prompt, in the protocol's cache order (tools, system, messages). */
interface Segment {
  readonly tokens: number
  readonly key: string
  readonly breakpoint: boolean
}

function segmentsOf(body: MessagesRequestBody): Segment[] {
  const segments: Segment[] = []
  const add = (value: unknown, tokens: number, breakpoint: boolean): void => {
    const { cache_control: _ignored, ...rest } = value as Block
    segments.push({ tokens, key: JSON.stringify(rest), breakpoint })
  }
  for (const tool of body.tools ?? []) add(tool, countTokens(JSON.stringify(tool)), (tool as Block).cache_control !== undefined)
  for (const block of blocksOf(body.system)) add(block, countTokens(blockText(block)), block.cache_control !== undefined)
  for (const message of body.messages) {
    const blocks = blocksOf(message.content)
    blocks.forEach((block, i) => {
      // Each message costs 3 tokens besides its blocks' text (counted with its first block).
      add({ role: message.role, ...block }, countTokens(blockText(block)) + (i === 0 ? 3 : 0), block.cache_control !== undefined)
    })
  }
  return segments
}

/**
 * The server's own token count of a Messages request, independent of any
 * estimate dsh makes: every word, digit and punctuation mark of the system,
 * messages and tools is one token (a tool call's name and input JSON, a
 * thinking block's text included), plus 3 per message.
 */
export function messagesTokenCount(body: MessagesRequestBody): number {
  return segmentsOf(body).reduce((sum, segment) => sum + segment.tokens, 0)
}

/** How many block boundaries before a breakpoint the cache looks back for an earlier prefix, as the API does. */
const LOOKBACK = 20

/**
 * Reads and writes the server's cache for `body`: `{ read, write, input }`
 * tokens (disjoint). Every block boundary's prefix has a hash; a breakpoint
 * reads the longest prefix the cache holds among its own and the 20
 * boundaries before it, and every breakpoint's prefix is written.
 */
function cacheUsage(cache: Set<string>, body: MessagesRequestBody): { read: number; write: number; input: number } {
  const segments = segmentsOf(body)
  const hash = createHash('sha256')
  const prefixes: { key: string; tokens: number }[] = []
  let tokens = 0
  for (const segment of segments) {
    hash.update(segment.key)
    tokens += segment.tokens
    prefixes.push({ key: hash.copy().digest('hex'), tokens })
  }
  let read = 0
  let lastBreakpoint = 0
  segments.forEach((segment, at) => {
    if (!segment.breakpoint) return
    for (let back = at; back >= 0 && back > at - LOOKBACK; back--) {
      const prefix = prefixes[back] as { key: string; tokens: number }
      if (cache.has(prefix.key)) {
        read = Math.max(read, prefix.tokens)
        break
      }
    }
    lastBreakpoint = (prefixes[at] as { tokens: number }).tokens
  })
  segments.forEach((segment, at) => {
    if (segment.breakpoint) cache.add((prefixes[at] as { key: string }).key)
  })
  return { read, write: Math.max(0, lastBreakpoint - read), input: tokens - Math.max(read, lastBreakpoint) }
}

/** Why the real API would refuse this body's history (a bad thinking signature, a tool loop without its thinking), or undefined. */
function refusal(body: MessagesRequestBody): string | undefined {
  const messages = body.messages
  for (let m = 0; m < messages.length; m++) {
    const blocks = blocksOf(messages[m]?.content)
    for (let b = 0; b < blocks.length; b++) {
      const block = blocks[b] as Block
      if (block.type === 'thinking' && block.signature !== thinkingSignature(block.thinking ?? ''))
        return `messages.${m}.content.${b}: Invalid \`signature\` in \`thinking\` block`
    }
  }
  const last = messages.at(-1)
  const answered = messages.at(-2)
  if (
    body.thinking?.type === 'enabled' &&
    last?.role === 'user' &&
    blocksOf(last.content).some((block) => block.type === 'tool_result') &&
    answered?.role === 'assistant'
  ) {
    const first = blocksOf(answered.content)[0]
    if (first !== undefined && first.type !== 'thinking' && first.type !== 'redacted_thinking') {
      return `messages.${messages.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`
    }
  }
  return undefined
}

const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
}

/** Anthropic's error body; the server's generic type (`invalid_request_error`, `server_error`) becomes the status's own. */
function messagesError(res: ServerResponse, status: number, detail: ErrorDetail, headers?: Readonly<Record<string, string>>): void {
  const generic = detail.type === 'invalid_request_error' || detail.type === 'server_error'
  const type = generic ? (ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')) : detail.type
  writeJson(res, status, { type: 'error', error: { type, message: detail.message } }, { 'request-id': `req_test_${status}`, ...headers })
}

/** Streams the reply; `cache` holds the hashes of the breakpoint prefixes this server has seen. Returns the usage sent (none when it hung). */
function stream(
  res: ServerResponse,
  cache: Set<string>,
  body: MessagesRequestBody,
  reply: StreamReply,
  onHang: () => void,
): MessagesUsage | undefined {
  const pieces = reply.reasoning ?? []
  const thinkingTokens = 2 * pieces.length
  const derived = cacheUsage(cache, body)
  const prompt =
    reply.usage === undefined ? derived : { read: reply.usage.cached ?? 0, write: 0, input: reply.usage.prompt - (reply.usage.cached ?? 0) }
  const output = reply.usage?.completion ?? 5 + (reply.content?.length ?? 0) + 3 * (reply.toolCalls?.length ?? 0) + thinkingTokens
  const usage: MessagesUsage = {
    input_tokens: prompt.input,
    output_tokens: output,
    cache_read_input_tokens: prompt.read,
    cache_creation_input_tokens: prompt.write,
    output_tokens_details: { thinking_tokens: reply.usage?.reasoning ?? thinkingTokens },
  }
  openEventStream(res)
  const send = (type: string, data: Record<string, unknown>): void => {
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
  }
  send('message_start', {
    message: {
      id: `msg_test_${randomUUID().replaceAll('-', '').slice(0, 20)}`,
      type: 'message',
      role: 'assistant',
      model: body.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: {
        input_tokens: usage.input_tokens,
        cache_read_input_tokens: usage.cache_read_input_tokens,
        cache_creation_input_tokens: usage.cache_creation_input_tokens,
        output_tokens: 1,
      },
    },
  })
  send('ping', {})
  let index = 0
  if (pieces.length > 0) {
    send('content_block_start', { index, content_block: { type: 'thinking', thinking: '', signature: '' } })
    for (const piece of pieces) send('content_block_delta', { index, delta: { type: 'thinking_delta', thinking: piece } })
    send('content_block_delta', { index, delta: { type: 'signature_delta', signature: thinkingSignature(pieces.join('')) } })
    send('content_block_stop', { index })
    index++
  }
  const content = reply.content ?? []
  if (content.length > 0 || reply.hangAfter !== undefined) {
    send('content_block_start', { index, content_block: { type: 'text', text: '' } })
    for (let i = 0; i < content.length; i++) {
      if (reply.hangAfter === i) {
        onHang()
        return undefined
      }
      send('content_block_delta', { index, delta: { type: 'text_delta', text: content[i] } })
    }
    if (reply.hangAfter !== undefined) {
      onHang()
      return undefined
    }
    send('content_block_stop', { index })
    index++
  }
  const calls = reply.toolCalls ?? []
  for (const call of calls) {
    const id = call.id === '' ? `toolu_test_${randomUUID().replaceAll('-', '').slice(0, 20)}` : call.id
    send('content_block_start', { index, content_block: { type: 'tool_use', id, name: call.name, input: {} } })
    // The input arrives as JSON fragments, as the real API sends it.
    for (let at = 0; at < call.arguments.length; at += 7) {
      send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: call.arguments.slice(at, at + 7) } })
    }
    send('content_block_stop', { index })
    index++
  }
  send('message_delta', {
    delta: { stop_reason: reply.finish ?? (calls.length > 0 ? 'tool_use' : 'end_turn'), stop_sequence: null },
    usage,
  })
  send('message_stop', {})
  res.end()
  return usage
}

/** The Messages protocol of one server (its own prompt cache). */
export function messagesProtocol(): ModelProtocol {
  const cache = new Set<string>()
  return {
    name: 'messages',
    path: '/messages',
    tokens: (body) => messagesTokenCount(body as MessagesRequestBody),
    error: messagesError,
    refuse: (body) => {
      const message = refusal(body as MessagesRequestBody)
      return message === undefined ? undefined : { status: 400, detail: { message, type: 'invalid_request_error' } }
    },
    stream: (res, body, reply, onHang) => ({ usage: stream(res, cache, body as MessagesRequestBody, reply, onHang) }),
  }
}
