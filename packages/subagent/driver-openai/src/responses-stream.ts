import { randomUUID } from 'node:crypto'
import type OpenAI from 'openai'
import { DriverOpenAIError } from './errors.js'
import { cancelled, type ModelStep, type ResponsesInput, type StepOptions, type StreamAttempt, unfinished } from './step.js'
import { responsesTools } from './tools.js'
import { type ResponseUsage, usageFromResponses } from './usage.js'

/**
 * Streams one Responses API request (`client.responses.create` with
 * `stream: true`) and maps its events to what a step records:
 * `response.output_text.delta` → content, `response.reasoning_summary_text.delta`
 * and `response.reasoning_text.delta` → reasoning, function call items
 * (`response.output_item.added`, `response.function_call_arguments.delta`,
 * `response.output_item.done`) → tool calls, `response.completed` /
 * `response.incomplete` → usage and why it stopped. The response id comes
 * from `response.created`. `response.failed` and an `error` event reject
 * with `DRIVER_OPENAI_REQUEST_FAILED` carrying the server's message. Each
 * usage the stream reports goes to `reportUsage`, `response.failed`'s too.
 */
export async function streamResponse(
  client: OpenAI,
  body: Record<string, unknown> & { model: string },
  request: StepOptions,
  responses: ResponsesInput,
  { signal, progress, bound, markEmitted, reportUsage }: StreamAttempt,
): Promise<ModelStep> {
  const { data: stream, response } = await client.responses
    .create(
      {
        ...body,
        model: body.model,
        input: responses.input,
        ...(responses.instructions === undefined ? {} : { instructions: responses.instructions }),
        ...(responses.previous_response_id === undefined ? {} : { previous_response_id: responses.previous_response_id }),
        ...(request.tools.length === 0 ? {} : { tools: responsesTools(request.tools) }),
        stream: true,
      },
      { signal },
    )
    .withResponse()
  let text = ''
  let usage: ResponseUsage | undefined
  let finishReason: string | undefined
  let responseId: string | undefined
  /** Function calls by output item id, in output order. */
  const calls = new Map<string, { id: string; name: string; arguments: string }>()
  const callOf = (itemId: string): { id: string; name: string; arguments: string } => {
    let call = calls.get(itemId)
    if (call === undefined) {
      bound.part(calls.size, 'function call')
      call = { id: '', name: '', arguments: '' }
      calls.set(itemId, call)
    }
    return call
  }
  for await (const event of stream) {
    progress()
    switch (event.type) {
      case 'response.created':
        responseId = event.response.id
        break
      case 'response.output_text.delta':
        if (event.delta.length === 0) break
        bound.take(event.delta)
        markEmitted()
        text += event.delta
        request.onContent(event.delta)
        break
      case 'response.reasoning_summary_text.delta':
      case 'response.reasoning_text.delta':
        if (event.delta.length === 0) break
        bound.take(event.delta)
        markEmitted()
        request.onReasoning(event.delta)
        break
      case 'response.output_item.added':
      case 'response.output_item.done':
        if (event.item.type === 'function_call') {
          const call = callOf(event.item.id ?? `output-${event.output_index}`)
          call.id = event.item.call_id
          if (event.item.name !== call.name) {
            bound.take(event.item.name)
            call.name = event.item.name
          }
          // The finished item holds the whole argument text (the deltas are its fragments, counted already).
          if (event.type === 'response.output_item.done') {
            bound.take(event.item.arguments.slice(call.arguments.length))
            call.arguments = event.item.arguments
          }
        }
        break
      case 'response.function_call_arguments.delta':
        bound.take(event.delta)
        callOf(event.item_id).arguments += event.delta
        break
      case 'response.completed':
      case 'response.incomplete':
        responseId = event.response.id
        if (event.response.usage !== undefined) {
          usage = usageFromResponses(event.response.usage)
          reportUsage(usage)
        }
        finishReason = event.type === 'response.incomplete' ? (event.response.incomplete_details?.reason ?? 'incomplete') : 'completed'
        break
      case 'response.failed':
        // A failed response may still say what it used (those tokens were spent).
        if (event.response.usage !== undefined) reportUsage(usageFromResponses(event.response.usage))
        throw new DriverOpenAIError(
          'DRIVER_OPENAI_REQUEST_FAILED',
          `The model server failed the response: ${event.response.error?.message ?? 'no reason given'}`,
          { details: { ...(event.response.error?.code ? { serverCode: event.response.error.code } : {}) } },
        )
      case 'error':
        throw new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', `The model server sent an error: ${event.message}`, {
          details: { ...(event.code ? { serverCode: event.code } : {}) },
        })
    }
  }
  // The client ends the loop quietly when the signal aborts (the caller's, or the deadline's).
  if (signal.aborted) throw cancelled()
  if (finishReason === undefined) throw unfinished('no response.completed or response.incomplete event', response)
  const toolCalls = [...calls.values()]
    .filter((call) => call.name.length > 0)
    .map((call) => ({ id: call.id.length > 0 ? call.id : `call_${randomUUID()}`, name: call.name, arguments: call.arguments }))
  return { text, toolCalls, usage, finishReason, responseId }
}
