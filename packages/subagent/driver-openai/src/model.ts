import { randomUUID } from 'node:crypto'
import type { DshError } from '@dsh/context'
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai'
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import { type ModelApi, type ModelConfig, type ModelConfigInput, resolveModelConfig } from './config.js'
import { DriverOpenAIError } from './errors.js'
import {
  boundedText,
  brokenAfterOutput,
  type DeadlineErrors,
  fetchWithBoundedErrors,
  requestDeadline,
  StepBound,
  sentence,
} from './limits.js'
import { streamResponse } from './responses-stream.js'
import { checkRetryPolicy, isRetryableStatus, type RetryPolicy, retryAfterMs } from './retry.js'
import { BOUND_ERRORS, cancelled, type ModelStep, type StepOptions, type StepRequest, type StreamAttempt, unfinished } from './step.js'
import { type ResponseUsage, usageFromChat } from './usage.js'

export interface ModelClientOptions extends ModelConfigInput {
  readonly retry?: RetryPolicy
  /** The longest a request may go with nothing from the server, until its headers and between streamed chunks, in ms (default 10 minutes). */
  readonly timeoutMs?: number
  /** Extra request body fields for servers with their own knobs (e.g. `{ temperature: 0 }`). */
  readonly extraBody?: Readonly<Record<string, unknown>>
}

/** A Chat Completions and Responses client: the resolved configuration plus the `openai` client. The key stays inside. */
export interface ModelClient {
  /** The API an agent's requests use (`chat` or `responses`). */
  readonly api: ModelApi
  readonly model: string
  readonly baseURL: string
  /** Who serves the model, for usage attribution and price tables: the base URL's host name (e.g. `api.deepseek.com`). */
  readonly provider: string
  /** Blanks the API key out of any text. */
  readonly redact: (text: string) => string
  /** Streams one response, with the retry policy; rejects with a `DriverOpenAIError`. */
  step(request: StepRequest): Promise<ModelStep>
}

type StreamDelta = OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null }

export function createModelClient(options: ModelClientOptions = {}): ModelClient {
  const config: ModelConfig = resolveModelConfig(options)
  const retry = checkRetryPolicy(options.retry)
  const timeout = options.timeoutMs ?? 600_000
  if (!Number.isSafeInteger(timeout) || timeout <= 0) {
    throw new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', `timeoutMs must be a positive integer, got ${String(options.timeoutMs)}.`)
  }
  // The client's own retries are off: ours are bounded, injectable and never repeat recorded output.
  // Its logger is off too: nothing it could print (headers included) reaches a console.
  // Its fetch reads at most ERROR_BODY_MAX_BYTES (64 KiB) of an error's body.
  const client = new OpenAI({
    apiKey: config.apiKey,
    baseURL: config.baseURL,
    maxRetries: 0,
    timeout,
    logLevel: 'off',
    fetch: fetchWithBoundedErrors,
  })
  const extraBody = options.extraBody ?? {}

  return Object.freeze({
    api: config.api,
    model: config.model,
    baseURL: config.baseURL,
    provider: new URL(config.baseURL).hostname,
    redact: config.redact,
    async step(request: StepRequest): Promise<ModelStep> {
      for (let attempt = 1; ; attempt++) {
        let emitted = false
        let reported: ResponseUsage | undefined
        const deadline = requestDeadline(request.signal, timeout, DEADLINE_ERRORS)
        try {
          const body = { ...extraBody, model: request.model ?? config.model }
          const streamAttempt: StreamAttempt = {
            signal: deadline.signal,
            progress: deadline.progress,
            bound: new StepBound(BOUND_ERRORS),
            markEmitted: () => {
              emitted = true
            },
            reportUsage: (usage) => {
              reported = usage
            },
          }
          if (request.responses !== undefined) return await streamResponse(client, body, request, request.responses, streamAttempt)
          return await streamOnce(client, body, request, request.messages, streamAttempt)
        } catch (error) {
          deadline.clear()
          // The tokens the server reported before the failure were spent: the error carries them to `step/end`.
          const spent = (failure: DshError): DshError => withUsage(failure, reported)
          if (request.signal.aborted) throw spent(cancelled())
          const expired = deadline.expired()
          if (!expired && error instanceof APIUserAbortError) throw spent(cancelled())
          const status = error instanceof APIError ? error.status : undefined
          const retryable = !emitted && (expired || error instanceof APIConnectionError || isRetryableStatus(status))
          if (!retryable || attempt >= retry.maxAttempts)
            throw spent(expired ? deadline.timedOut(attempt, emitted) : toDriverError(error, config.redact, attempt, emitted))
          await retry.backoff(attempt, error instanceof APIError ? retryAfterMs(error.headers) : undefined, request.signal)
          if (request.signal.aborted) throw cancelled()
        } finally {
          deadline.clear()
        }
      }
    },
  })
}

/** `failure`, carrying `usage` when the server reported any before it. */
function withUsage(failure: DshError, usage: ResponseUsage | undefined): DshError {
  if (usage !== undefined && failure instanceof DriverOpenAIError) failure.usage = usage
  return failure
}

/** The typed errors of a request that ran past `timeoutMs`: retried like a lost connection unless output was recorded. */
const DEADLINE_ERRORS: DeadlineErrors = {
  server: 'The model server',
  broken: (message) => new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', message),
  silent: (message) => new DriverOpenAIError('DRIVER_OPENAI_CONNECTION', message),
}

async function streamOnce(
  client: OpenAI,
  body: Record<string, unknown> & { model: string },
  request: StepOptions,
  messages: ChatCompletionMessageParam[],
  { signal, progress, bound, markEmitted, reportUsage }: StreamAttempt,
): Promise<ModelStep> {
  const { data: stream, response } = await client.chat.completions
    .create(
      {
        ...body,
        model: body.model,
        messages,
        ...(request.tools.length === 0 ? {} : { tools: request.tools }),
        stream: true,
        stream_options: { include_usage: true },
      },
      { signal },
    )
    .withResponse()
  let text = ''
  let usage: ResponseUsage | undefined
  let finishReason: string | undefined
  let responseId: string | undefined
  const calls: { id: string; name: string; arguments: string }[] = []
  for await (const chunk of stream) {
    progress()
    if (chunk.usage) {
      usage = usageFromChat(chunk.usage)
      reportUsage(usage)
    }
    if (responseId === undefined && typeof chunk.id === 'string' && chunk.id.length > 0) responseId = chunk.id
    const choice = chunk.choices?.[0]
    if (choice === undefined) continue
    const delta = (choice.delta ?? {}) as StreamDelta
    if (typeof delta.reasoning_content === 'string' && delta.reasoning_content.length > 0) {
      bound.take(delta.reasoning_content)
      markEmitted()
      request.onReasoning(delta.reasoning_content)
    }
    if (typeof delta.content === 'string' && delta.content.length > 0) {
      bound.take(delta.content)
      markEmitted()
      text += delta.content
      request.onContent(delta.content)
    }
    for (const fragment of delta.tool_calls ?? []) {
      // Bounded: a far index would make a sparse array that every later pass over the calls walks whole.
      const index = bound.part(fragment.index ?? calls.length, 'tool call')
      const call = calls[index] ?? { id: '', name: '', arguments: '' }
      calls[index] = call
      if (fragment.id) call.id = fragment.id
      if (fragment.function?.name) {
        bound.take(fragment.function.name)
        call.name += fragment.function.name
      }
      if (fragment.function?.arguments) {
        bound.take(fragment.function.arguments)
        call.arguments += fragment.function.arguments
      }
    }
    if (choice.finish_reason) finishReason = choice.finish_reason
  }
  // The client ends the loop quietly when the signal aborts (the caller's, or the deadline's).
  if (signal.aborted) throw cancelled()
  if (finishReason === undefined) throw unfinished('no choice carried a finish_reason', response)
  const toolCalls = calls
    .filter((call) => call !== undefined && call.name.length > 0)
    // Some servers send no call id: make one that cannot collide with another step's.
    .map((call) => ({ id: call.id.length > 0 ? call.id : `call_${randomUUID()}`, name: call.name, arguments: call.arguments }))
  return { text, toolCalls, usage, finishReason, responseId }
}

/** Maps a failure to a typed error; the server's own message is kept (redacted, bounded) so a person can act on it. */
export function toDriverError(error: unknown, redact: (text: string) => string, attempts: number, emitted = false): DriverOpenAIError {
  const tries = attempts === 1 ? '' : ` after ${attempts} attempts`
  // A bound of the driver's own says what it stopped; its message holds nothing the server sent.
  if (error instanceof DriverOpenAIError && error.code === 'DRIVER_OPENAI_RESPONSE_TOO_LARGE') return error
  if (emitted && !(error instanceof APIError && error.status !== undefined)) {
    const message = error instanceof Error ? error.message : String(error)
    return new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', brokenAfterOutput(boundedText(redact(message))))
  }
  if (error instanceof APIConnectionError) {
    return new DriverOpenAIError(
      'DRIVER_OPENAI_CONNECTION',
      `${sentence(`Could not reach the model server${tries}: ${boundedText(redact(error.message))}`)} Check --base-url and that the server is running.`,
    )
  }
  if (error instanceof APIError) {
    const status = error.status
    const server = boundedText(redact(serverMessage(error)))
    const details = {
      status,
      ...(error.type ? { type: boundedText(redact(String(error.type)), 100) } : {}),
      ...(error.code ? { serverCode: boundedText(redact(String(error.code)), 100) } : {}),
    }
    if (status === 400 || status === 422)
      return new DriverOpenAIError('DRIVER_OPENAI_BAD_REQUEST', `The model server rejected the request (HTTP ${status}): ${server}`, {
        details,
      })
    if (status === 401 || status === 403) {
      return new DriverOpenAIError(
        'DRIVER_OPENAI_UNAUTHORIZED',
        `${sentence(`The model server refused the API key (HTTP ${status}): ${server}`)} Check DSH_API_KEY.`,
        { details },
      )
    }
    if (status === 404)
      return new DriverOpenAIError(
        'DRIVER_OPENAI_NOT_FOUND',
        `${sentence(`The model server has no such model or route (HTTP 404): ${server}`)} Check --model and --base-url.`,
        { details },
      )
    if (status === 429)
      return new DriverOpenAIError('DRIVER_OPENAI_RATE_LIMITED', `The model server is rate limiting${tries} (HTTP 429): ${server}`, {
        details,
      })
    if (status !== undefined && status >= 500)
      return new DriverOpenAIError('DRIVER_OPENAI_UNAVAILABLE', `The model server failed${tries} (HTTP ${status}): ${server}`, { details })
    return new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', `The model request failed (HTTP ${String(status)}): ${server}`, {
      details,
    })
  }
  const message = error instanceof Error ? error.message : String(error)
  return new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', `The model request failed: ${boundedText(redact(message))}`)
}

function serverMessage(error: APIError): string {
  const body = error.error as { message?: unknown } | undefined
  if (body && typeof body.message === 'string' && body.message.length > 0) return body.message
  return error.message
}
