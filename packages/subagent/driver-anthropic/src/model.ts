import Anthropic, { APIConnectionError, APIError, APIUserAbortError } from '@anthropic-ai/sdk'
import type { MessageCreateParamsStreaming, MessageParam, TextBlockParam, Tool } from '@anthropic-ai/sdk/resources/messages'
import type { DshError } from '@dsh/context'
import {
  boundedText,
  brokenAfterOutput,
  type DeadlineErrors,
  fetchWithBoundedErrors,
  isRetryableStatus,
  notAnEventStream,
  type RetryPolicy,
  requestDeadline,
  retryAfterMs,
  StepBound,
  type StepBoundErrors,
  sentence,
} from '@dsh/driver-openai'
import { type AnthropicConfig, type AnthropicConfigInput, resolveAnthropicConfig } from './config.js'
import { DriverAnthropicError } from './errors.js'
import { checkRetryPolicy } from './retry.js'
import { type AnthropicStep, StepAssembler, type StreamCallbacks } from './stream.js'
import type { AnthropicUsage } from './usage.js'

export interface AnthropicClientOptions extends AnthropicConfigInput {
  readonly retry?: RetryPolicy
  /** The longest a request may go with nothing from the server, until its headers and between streamed chunks, in ms (default 10 minutes). */
  readonly timeoutMs?: number
}

export interface AnthropicStepRequest extends StreamCallbacks {
  readonly system: TextBlockParam[] | undefined
  readonly messages: MessageParam[]
  readonly tools: Tool[]
  readonly signal: AbortSignal
  /** Overrides the client's model for this request (a descriptor's `model`). */
  readonly model?: string
  /** Call without extended thinking even when the client has a budget (a summary needs none). */
  readonly noThinking?: boolean
}

/** A Messages client: the resolved configuration plus the SDK client. The key stays inside. */
export interface AnthropicClient {
  readonly model: string
  readonly baseURL: string
  /** Who serves the model, for usage attribution and price tables: the base URL's host name (e.g. `api.anthropic.com`). */
  readonly provider: string
  /** Blanks the API key out of any text. */
  readonly redact: (text: string) => string
  /** The request body (without `stream`) a step would send: what the driver logs nowhere and tests pin as fixtures. */
  body(request: Omit<AnthropicStepRequest, 'signal' | 'onText' | 'onThinking'>): MessageCreateParamsStreaming
  /** Streams one response, with the retry policy; rejects with a `DriverAnthropicError`. */
  step(request: AnthropicStepRequest): Promise<AnthropicStep>
}

export function createAnthropicClient(options: AnthropicClientOptions = {}): AnthropicClient {
  const config: AnthropicConfig = resolveAnthropicConfig(options)
  const retry = checkRetryPolicy(options.retry)
  const timeout = options.timeoutMs ?? 600_000
  if (!Number.isSafeInteger(timeout) || timeout <= 0) {
    throw new DriverAnthropicError(
      'DRIVER_ANTHROPIC_INVALID_OPTIONS',
      `timeoutMs must be a positive integer, got ${String(options.timeoutMs)}.`,
    )
  }
  // The SDK's own retries are off: ours are bounded, injectable and never repeat recorded output.
  // Its logger is off too, and it is given the key and base URL so it reads no credentials of its own.
  // Its fetch reads at most ERROR_BODY_MAX_BYTES (64 KiB) of an error's body.
  const client = new Anthropic({
    apiKey: config.apiKey,
    baseURL: config.baseURL,
    maxRetries: 0,
    timeout,
    logLevel: 'off',
    fetch: fetchWithBoundedErrors,
  })
  const body = (request: Omit<AnthropicStepRequest, 'signal' | 'onText' | 'onThinking'>): MessageCreateParamsStreaming => ({
    model: request.model ?? config.model,
    max_tokens: config.maxTokens,
    ...(request.system === undefined || request.system.length === 0 ? {} : { system: request.system }),
    messages: request.messages,
    ...(request.tools.length === 0 ? {} : { tools: request.tools }),
    ...(config.thinkingBudget === undefined || request.noThinking === true
      ? {}
      : { thinking: { type: 'enabled' as const, budget_tokens: config.thinkingBudget } }),
    stream: true,
  })

  return Object.freeze({
    model: config.model,
    baseURL: config.baseURL,
    provider: new URL(config.baseURL).hostname,
    redact: config.redact,
    body,
    async step(request: AnthropicStepRequest): Promise<AnthropicStep> {
      const params = body(request)
      for (let attempt = 1; ; attempt++) {
        const assembler = new StepAssembler(request, new StepBound(BOUND_ERRORS))
        const deadline = requestDeadline(request.signal, timeout, DEADLINE_ERRORS)
        try {
          const { data: stream, response } = await client.messages.create(params, { signal: deadline.signal }).withResponse()
          for await (const event of stream) {
            deadline.progress()
            assembler.add(event)
          }
          // The client ends the loop quietly when the signal aborts (the caller's, or the deadline's).
          if (deadline.signal.aborted) throw cancelled()
          if (!assembler.finished) throw unfinished(response)
          return assembler.step()
        } catch (error) {
          deadline.clear()
          // The tokens the server reported before the failure were spent: the error carries them to `step/end`.
          const spent = (failure: DshError): DshError => withUsage(failure, assembler.usage)
          if (request.signal.aborted) throw spent(cancelled())
          const expired = deadline.expired()
          if (!expired && (error instanceof APIUserAbortError || isCancelled(error))) throw spent(cancelled())
          const status = error instanceof APIError ? error.status : undefined
          const retryable = !assembler.emitted && (expired || error instanceof APIConnectionError || isRetryableStatus(status))
          if (!retryable || attempt >= retry.maxAttempts)
            throw spent(
              expired ? deadline.timedOut(attempt, assembler.emitted) : toDriverError(error, config.redact, attempt, assembler.emitted),
            )
          await retry.backoff(attempt, error instanceof APIError ? retryAfterMs(error.headers) : undefined, request.signal)
          if (request.signal.aborted) throw cancelled()
        } finally {
          deadline.clear()
        }
      }
    },
  })
}

const BOUND_ERRORS: StepBoundErrors = {
  tooLarge: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE', message),
  malformed: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_REQUEST_FAILED', message),
}

/**
 * A stream that ended before the server said why the message stopped: a
 * proxy cut it, or `response` was no event stream at all (a sign-in page, a
 * JSON answer), which the error says with its content type and first bytes.
 */
function unfinished(response: Response): DriverAnthropicError {
  const other = notAnEventStream(response)
  if (other !== undefined) {
    return new DriverAnthropicError(
      'DRIVER_ANTHROPIC_REQUEST_FAILED',
      `${sentence(`The Anthropic API's reply was not an event stream (${other})`)} Check --base-url: it must name an Anthropic Messages API (its origin, without /v1/messages).`,
    )
  }
  return new DriverAnthropicError(
    'DRIVER_ANTHROPIC_REQUEST_FAILED',
    "The Anthropic API's stream ended before the message was finished (no message_delta carried a stop_reason).",
  )
}

/** The typed errors of a request that ran past `timeoutMs`: retried like a lost connection unless output was recorded. */
const DEADLINE_ERRORS: DeadlineErrors = {
  server: 'The Anthropic API',
  broken: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_REQUEST_FAILED', message),
  silent: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_CONNECTION', message),
}

function isCancelled(error: unknown): boolean {
  return error instanceof DriverAnthropicError && error.code === 'CANCELLED'
}

/** `failure`, carrying `usage` when the server reported any before it. */
function withUsage(failure: DshError, usage: AnthropicUsage | undefined): DshError {
  if (usage !== undefined && failure instanceof DriverAnthropicError) failure.usage = usage
  return failure
}

function cancelled(): DriverAnthropicError {
  return new DriverAnthropicError('CANCELLED', 'The model request was cancelled by its caller (AbortSignal aborted).')
}

/** Maps a failure to a typed error; the server's own message is kept (redacted, bounded) so a person can act on it. */
export function toDriverError(error: unknown, redact: (text: string) => string, attempts: number, emitted = false): DriverAnthropicError {
  const tries = attempts === 1 ? '' : ` after ${attempts} attempts`
  // A bound of the driver's own says what it stopped; its message holds nothing the server sent.
  if (error instanceof DriverAnthropicError && error.code === 'DRIVER_ANTHROPIC_RESPONSE_TOO_LARGE') return error
  if (emitted && !(error instanceof APIError && error.status !== undefined)) {
    const message = error instanceof Error ? error.message : String(error)
    return new DriverAnthropicError('DRIVER_ANTHROPIC_REQUEST_FAILED', brokenAfterOutput(boundedText(redact(message))))
  }
  if (error instanceof APIConnectionError) {
    return new DriverAnthropicError(
      'DRIVER_ANTHROPIC_CONNECTION',
      `${sentence(`Could not reach the Anthropic API${tries}: ${boundedText(redact(error.message))}`)} Check --base-url and that the server is running.`,
    )
  }
  if (error instanceof APIError) {
    const status = error.status
    const server = boundedText(redact(error.apiMessage ?? error.message))
    const details = {
      status,
      ...(error.type ? { type: boundedText(redact(String(error.type)), 100) } : {}),
      ...(error.requestID ? { requestId: boundedText(redact(String(error.requestID)), 100) } : {}),
    }
    const make = (code: Parameters<typeof newError>[0], message: string): DriverAnthropicError => newError(code, message, details)
    if (status === 400 || status === 413 || status === 422)
      return make('DRIVER_ANTHROPIC_BAD_REQUEST', `The Anthropic API rejected the request (HTTP ${status}): ${server}`)
    if (status === 401 || status === 403)
      return make(
        'DRIVER_ANTHROPIC_UNAUTHORIZED',
        `${sentence(`The Anthropic API refused the API key (HTTP ${status}): ${server}`)} Check ANTHROPIC_API_KEY or DSH_API_KEY.`,
      )
    if (status === 404)
      return make('DRIVER_ANTHROPIC_NOT_FOUND', `${sentence(`No such model or route (HTTP 404): ${server}`)} Check --model and --base-url.`)
    if (status === 429) return make('DRIVER_ANTHROPIC_RATE_LIMITED', `The Anthropic API is rate limiting${tries} (HTTP 429): ${server}`)
    if (status === 529) return make('DRIVER_ANTHROPIC_OVERLOADED', `The Anthropic API is overloaded${tries} (HTTP 529): ${server}`)
    if (status !== undefined && status >= 500)
      return make('DRIVER_ANTHROPIC_UNAVAILABLE', `The Anthropic API failed${tries} (HTTP ${status}): ${server}`)
    return make('DRIVER_ANTHROPIC_REQUEST_FAILED', `The model request failed (HTTP ${String(status)}): ${server}`)
  }
  const message = error instanceof Error ? error.message : String(error)
  return new DriverAnthropicError('DRIVER_ANTHROPIC_REQUEST_FAILED', `The model request failed: ${boundedText(redact(message))}`)
}

function newError(
  code: ConstructorParameters<typeof DriverAnthropicError>[0],
  message: string,
  details: Record<string, unknown>,
): DriverAnthropicError {
  return new DriverAnthropicError(code, message, { details })
}
