import { promptTurn, runTurnLoop, type TurnErrors, type TurnFrameOptions, type TurnOutcome, turnFrame } from '@dsh/driver-openai/turn'
import { DriverAnthropicError } from './errors.js'
import type { AnthropicClient } from './model.js'
import { requestParts } from './requests.js'
import type { AnthropicStep } from './stream.js'
import { anthropicTools } from './tools.js'
import { type AnthropicUsage, addUsage, finishOf, NO_USAGE, tokenUsage } from './usage.js'

/** Model steps (requests) one turn may take before it ends with `DRIVER_ANTHROPIC_MAX_STEPS` (default 32). */
export const DEFAULT_MAX_STEPS = 32

const ERRORS: TurnErrors = {
  invalidOptions: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_INVALID_OPTIONS', message),
  requestFailed: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_REQUEST_FAILED', message),
  maxSteps: (message) => new DriverAnthropicError('DRIVER_ANTHROPIC_MAX_STEPS', message),
}

export interface AgentTurnOptions extends TurnFrameOptions {
  readonly client: AnthropicClient
  /** A model override for this turn (e.g. the child's descriptor setting). */
  readonly model?: string
}

/** How a turn ended; a failure's `error` is typed (a `DriverAnthropicError`, or the `DshError` that ended it). */
export type AgentTurnOutcome = TurnOutcome

/**
 * One turn of an agent over the Messages API: `turn/start`, then model steps
 * until the model answers without tool calls, then `turn/end`. Each step is
 * `step/start {model, provider}`; the streamed thinking as
 * `assistant/reasoning` and text as `assistant/chunk`; the whole step as
 * `assistant/message {text, blocks}` — its reasoning with the signature the
 * API needs to accept it back, its text and its tool calls, so the next
 * request sends them back verbatim; each call mirrored as `tool/call`;
 * `step/end {usage, finish, responseId}`; then each call's `tool/result`.
 * A step whose stream broke ends `step/end {finish: 'error'}` with the usage
 * the stream reported before it broke (`message_start`'s counts, and a
 * `message_delta`'s output count if one came).
 * The answer's `assistant/message` also carries the turn's summed usage.
 *
 * Invariants: the turn is always closed while the session is open (an abort
 * ends it with `abortReason`, a failure with `assistant/error` then
 * `turn/end {reason: 'error'}`); every `tool/call` gets a `tool/result`
 * before the turn ends; nothing already appended is rewritten or repeated.
 * Every request is built from the session's context (`@dsh/session-context`).
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnOutcome> {
  const { client, session, turn, tools, signal } = options
  const frame = turnFrame(options, (text) => client.redact(text), DEFAULT_MAX_STEPS, ERRORS)
  const definitions = anthropicTools(tools)
  const model = options.model ?? client.model
  let usage: AnthropicUsage = NO_USAGE
  let sawUsage = false
  return runTurnLoop({
    ...frame,
    request: () =>
      requestParts(session, {
        ...(options.context === undefined ? {} : { context: options.context }),
        ...(options.notices === undefined ? {} : { notices: options.notices }),
        ...(options.system === undefined ? {} : { system: options.system }),
        ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
        signal,
      }),
    stepStart: () => ({ model, provider: client.provider }),
    async call(parts, deltas) {
      const result: AnthropicStep = await client.step({
        ...parts,
        tools: definitions,
        signal,
        ...(options.model === undefined ? {} : { model: options.model }),
        onText: deltas.text,
        onThinking: deltas.reasoning,
      })
      const calls = result.toolCalls
      if (result.usage !== undefined) {
        usage = addUsage(usage, result.usage)
        sawUsage = true
      }
      // The step's message carries its signed thinking and its calls (the API needs them back verbatim).
      const message = { turn, text: result.text, blocks: result.blocks, provider: client.provider, model }
      return {
        calls,
        stepEnd: {
          ...(result.usage === undefined ? {} : { usage: tokenUsage(result.usage) }),
          finish: finishOf(result.stopReason, calls.length > 0),
          ...(result.responseId === undefined ? {} : { responseId: result.responseId }),
        },
        text: result.text,
        answer: { ...message, ...(sawUsage ? { usage: tokenUsage(usage) } : {}) },
        callsMessage: message,
      }
    },
    failedUsage: (error) => (error instanceof DriverAnthropicError && error.usage !== undefined ? tokenUsage(error.usage) : undefined),
  })
}

export interface RunAgentOptions extends Omit<AgentTurnOptions, 'turn' | 'abortReason'> {
  /** Appended as `user/message` before the turn; omit to continue from the log as it is (a resume). */
  readonly prompt?: string
}

/**
 * The top-level agent loop for one prompt: appends the prompt, runs a turn,
 * and ends an aborted turn with `interrupted` (what Ctrl-C means to a person).
 * The session must have no open turn (a loaded session has had crash repair).
 */
export function runAgent(options: RunAgentOptions): Promise<AgentTurnOutcome> {
  const { prompt, ...rest } = options
  const turn = promptTurn(options.session, prompt, ERRORS, options.onEvent)
  return runAgentTurn({ ...rest, turn, abortReason: 'interrupted' })
}
