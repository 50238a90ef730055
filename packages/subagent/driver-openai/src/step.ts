import type { ChatCompletionFunctionTool, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import type { ResponseInputItem } from 'openai/resources/responses/responses'
import { DriverOpenAIError } from './errors.js'
import { notAnEventStream, type StepBound, type StepBoundErrors, sentence } from './limits.js'
import type { ResponseUsage } from './usage.js'

/** One tool call as the model streamed it, fragments joined. */
export interface ModelToolCall {
  readonly id: string
  readonly name: string
  /** The raw JSON text of the arguments (it may be malformed; the tool runner says so to the model). */
  readonly arguments: string
}

/** One model step: what one streamed response (Chat Completions or Responses) said. */
export interface ModelStep {
  readonly text: string
  readonly toolCalls: readonly ModelToolCall[]
  readonly usage: ResponseUsage | undefined
  readonly finishReason: string | undefined
  /** The response's `id`, when the server sent one. */
  readonly responseId: string | undefined
}

/** A Responses request's own part: the input items, the response it continues, the system prompt. */
export interface ResponsesInput {
  readonly input: ResponseInputItem[]
  /** The response this request continues: only the items after it are in `input`. */
  readonly previous_response_id?: string
  readonly instructions?: string
}

/** One step's request: Chat `messages`, or a Responses input (then the Responses API is used). */
export type StepRequest = StepOptions &
  (
    | { readonly messages: ChatCompletionMessageParam[]; readonly responses?: undefined }
    | { readonly responses: ResponsesInput; readonly messages?: undefined }
  )

export interface StepOptions {
  /** The tools in Chat's form (the Responses API gets them as function tools). */
  readonly tools: ChatCompletionFunctionTool[]
  readonly signal: AbortSignal
  /** A content delta arrived. */
  readonly onContent: (delta: string) => void
  /** A reasoning delta arrived (DeepSeek's `reasoning_content`). */
  readonly onReasoning: (delta: string) => void
  /** Overrides the client's model for this request (a descriptor's `model`). */
  readonly model?: string
}

/** The error of an aborted request. */
export function cancelled(): DriverOpenAIError {
  return new DriverOpenAIError('CANCELLED', 'The model request was cancelled by its caller (AbortSignal aborted).')
}

/** The typed errors of a step's bound (`StepBound`). */
export const BOUND_ERRORS: StepBoundErrors = {
  tooLarge: (message) => new DriverOpenAIError('DRIVER_OPENAI_RESPONSE_TOO_LARGE', message),
  malformed: (message) => new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', message),
}

/**
 * What one attempt's stream is read under: its signal (the caller's and the
 * deadline), the deadline's restart at each chunk, the step's bound, the mark
 * that output was recorded, and where the usage the server reported goes (a
 * failed attempt's error carries it).
 */
export interface StreamAttempt {
  readonly signal: AbortSignal
  readonly progress: () => void
  readonly bound: StepBound
  readonly markEmitted: () => void
  readonly reportUsage: (usage: ResponseUsage) => void
}

/**
 * A stream that ended before the server said the response was finished: a
 * proxy cut it (`what` the server left out), or `response` was no event
 * stream at all (a sign-in page, a JSON answer), which the error says with
 * its content type and first bytes.
 */
export function unfinished(what: string, response?: Response): DriverOpenAIError {
  const other = notAnEventStream(response)
  if (other !== undefined) {
    return new DriverOpenAIError(
      'DRIVER_OPENAI_REQUEST_FAILED',
      `${sentence(`The model server's reply was not an event stream (${other})`)} Check --base-url: it must name an OpenAI-compatible API (often ending in /v1).`,
    )
  }
  return new DriverOpenAIError(
    'DRIVER_OPENAI_REQUEST_FAILED',
    `The model server's stream ended before the response was finished (${what}).`,
  )
}
