import type { ServerResponse } from 'node:http'
import type { Response, ResponseOutputItem, ResponseStreamEvent, ResponseUsage } from 'openai/resources/responses/responses'
import { derivedUsageOf, openAIError } from './chat-protocol.js'
import { countTokens, type ModelProtocol, openEventStream, type ScriptedUsage, type StreamReply } from './script.js'

/**
 * The Responses protocol of the test server (`POST /v1/responses`), as the
 * public API reference describes it: SSE frames `event: <type>` /
 * `data: {...}` of `ResponseStreamEvent`s — `response.created`,
 * `response.in_progress`, per output item `response.output_item.added`, its
 * deltas (`response.reasoning_summary_text.delta`,
 * `response.output_text.delta`, `response.function_call_arguments.delta`)
 * and `response.output_item.done`, then `response.completed` (or
 * `response.incomplete` for a `finish` of `max_output_tokens`) carrying the
 * usage; a `finish` of `failed` ends with `response.failed` instead. Every response is stored: a request naming a
 * `previous_response_id` the server never issued is refused (400, as
 * OpenAI answers), and its token count includes the chain it continues.
 */

export interface ResponsesRequestBody {
  readonly model: string
  readonly stream?: boolean
  readonly instructions?: string | null
  readonly input: string | readonly { readonly type?: string; readonly role?: string; readonly [field: string]: unknown }[]
  readonly previous_response_id?: string | null
  readonly tools?: readonly { readonly type: string; readonly name?: string; readonly [field: string]: unknown }[]
  readonly store?: boolean
}

/**
 * The server's own token count of the input items a Responses request
 * sends (the words, digits and punctuation marks of each item's JSON, plus
 * 3 per item) and of its instructions; the chain it continues is counted by
 * the server on top.
 */
export function responsesTokenCount(body: ResponsesRequestBody): number {
  const items = typeof body.input === 'string' ? [body.input] : body.input
  let tokens = typeof body.instructions === 'string' ? countTokens(body.instructions) : 0
  for (const item of items) tokens += 3 + countTokens(JSON.stringify(item))
  return tokens
}

function inputCount(body: ResponsesRequestBody): number {
  return typeof body.input === 'string' ? 1 : body.input.length
}

function responsesUsage({ prompt, completion, cached = 0, reasoning = 0 }: ScriptedUsage): ResponseUsage {
  return {
    input_tokens: prompt,
    input_tokens_details: { cached_tokens: cached, cache_write_tokens: 0 },
    output_tokens: completion,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: prompt + completion,
  }
}

/** The protocol, with its own store of issued responses (one per server). */
export function responsesProtocol(): ModelProtocol {
  /** Each issued response id and the tokens of the chain through it (its input and its output). */
  const stored = new Map<string, number>()
  const chainTokens = (body: ResponsesRequestBody): number =>
    (typeof body.previous_response_id === 'string' ? (stored.get(body.previous_response_id) ?? 0) : 0) + responsesTokenCount(body)

  function stream(res: ServerResponse, body: ResponsesRequestBody, reply: StreamReply, onHang: () => void): ResponseUsage | undefined {
    openEventStream(res)
    const id = `resp_test${stored.size}_${Math.random().toString(36).slice(2, 10)}`
    let sequence = 0
    const send = (event: ResponseStreamEvent): void => {
      res.write(`event: ${event.type}\ndata: ${JSON.stringify({ ...event, sequence_number: sequence++ })}\n\n`)
    }
    const output: ResponseOutputItem[] = []
    const response = (status: NonNullable<Response['status']>, extra: Partial<Response> = {}): Response => ({
      id,
      object: 'response',
      created_at: 1_700_000_000,
      status,
      model: body.model,
      output: [...output],
      output_text: '',
      error: null,
      incomplete_details: null,
      instructions: typeof body.instructions === 'string' ? body.instructions : null,
      metadata: null,
      parallel_tool_calls: true,
      temperature: null,
      tool_choice: 'auto',
      tools: [],
      top_p: null,
      previous_response_id: typeof body.previous_response_id === 'string' ? body.previous_response_id : null,
      ...extra,
    })
    send({ type: 'response.created', response: response('in_progress'), sequence_number: 0 })
    send({ type: 'response.in_progress', response: response('in_progress'), sequence_number: 0 })

    const reasoning = reply.reasoning ?? []
    if (reasoning.length > 0) {
      const item = { type: 'reasoning' as const, id: `rs_${id}`, summary: [] }
      const output_index = output.length
      send({ type: 'response.output_item.added', output_index, item, sequence_number: 0 })
      for (const delta of reasoning) {
        send({
          type: 'response.reasoning_summary_text.delta',
          item_id: item.id,
          output_index,
          summary_index: 0,
          delta,
          sequence_number: 0,
        })
      }
      const done = { ...item, summary: [{ type: 'summary_text' as const, text: reasoning.join('') }] }
      output.push(done)
      send({ type: 'response.output_item.done', output_index, item: done, sequence_number: 0 })
    }

    const content = reply.content ?? []
    if (content.length > 0 || reply.hangAfter !== undefined) {
      const itemId = `msg_${id}`
      const output_index = output.length
      send({
        type: 'response.output_item.added',
        output_index,
        item: { type: 'message', id: itemId, role: 'assistant', status: 'in_progress', content: [] },
        sequence_number: 0,
      })
      const part = { type: 'output_text' as const, text: '', annotations: [] }
      send({ type: 'response.content_part.added', item_id: itemId, output_index, content_index: 0, part, sequence_number: 0 })
      for (let i = 0; i < content.length; i++) {
        if (reply.hangAfter !== undefined && i === reply.hangAfter) {
          onHang()
          return undefined
        }
        const delta = content[i] as string
        send({
          type: 'response.output_text.delta',
          item_id: itemId,
          output_index,
          content_index: 0,
          delta,
          logprobs: [],
          sequence_number: 0,
        })
      }
      if (reply.hangAfter !== undefined && reply.hangAfter >= content.length) {
        onHang()
        return undefined
      }
      const text = content.join('')
      send({ type: 'response.output_text.done', item_id: itemId, output_index, content_index: 0, text, logprobs: [], sequence_number: 0 })
      const done = {
        type: 'message' as const,
        id: itemId,
        role: 'assistant' as const,
        status: 'completed' as const,
        content: [{ ...part, text }],
      }
      output.push(done)
      send({ type: 'response.output_item.done', output_index, item: done, sequence_number: 0 })
    }

    for (const call of reply.toolCalls ?? []) {
      const itemId = `fc_${id}_${output.length}`
      const output_index = output.length
      const item = { type: 'function_call' as const, id: itemId, call_id: call.id, name: call.name, arguments: '' }
      send({ type: 'response.output_item.added', output_index, item: { ...item, status: 'in_progress' }, sequence_number: 0 })
      // Arguments arrive in fragments, as the real server sends them.
      for (let at = 0; at < call.arguments.length; at += 7) {
        send({
          type: 'response.function_call_arguments.delta',
          item_id: itemId,
          output_index,
          delta: call.arguments.slice(at, at + 7),
          sequence_number: 0,
        })
      }
      send({
        type: 'response.function_call_arguments.done',
        item_id: itemId,
        output_index,
        name: call.name,
        arguments: call.arguments,
        sequence_number: 0,
      })
      const done = { ...item, arguments: call.arguments, status: 'completed' as const }
      output.push(done)
      send({ type: 'response.output_item.done', output_index, item: done, sequence_number: 0 })
    }

    if (reply.finish === 'failed') {
      // A failed response is not stored (it cannot be continued) and reports no usage.
      send({
        type: 'response.failed',
        response: response('failed', { error: { code: 'server_error', message: 'The model failed to finish the response.' } }),
        sequence_number: 0,
      })
      res.end()
      return undefined
    }
    const usage = responsesUsage(reply.usage ?? derivedUsageOf(inputCount(body), reply))
    stored.set(id, chainTokens(body) + usage.output_tokens)
    if (reply.finish === 'max_output_tokens') {
      send({
        type: 'response.incomplete',
        response: response('incomplete', { usage, incomplete_details: { reason: 'max_output_tokens' } }),
        sequence_number: 0,
      })
    } else {
      send({ type: 'response.completed', response: response('completed', { usage }), sequence_number: 0 })
    }
    res.end()
    return usage
  }

  return {
    name: 'responses',
    path: '/responses',
    tokens: (body) => chainTokens(body as ResponsesRequestBody),
    error: openAIError,
    refuse(raw) {
      const previous = (raw as ResponsesRequestBody).previous_response_id
      if (typeof previous !== 'string' || stored.has(previous)) return undefined
      return {
        status: 400,
        detail: {
          message: `Previous response with id '${previous}' not found.`,
          type: 'invalid_request_error',
          param: 'previous_response_id',
          code: 'previous_response_not_found',
        },
      }
    },
    stream: (res, body, reply, onHang) => ({ usage: stream(res, body as ResponsesRequestBody, reply, onHang) }),
  }
}
