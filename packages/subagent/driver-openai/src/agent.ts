import type { Session } from '@dsh/session'
import { DriverOpenAIError } from './errors.js'
import './events.js'
import { RESPONSES_API } from './chain.js'
import type { ModelClient } from './model.js'
import { type RequestOptions, requestInput, requestMessages } from './requests.js'
import type { StepRequest } from './step.js'
import { toolDefinitions } from './tools.js'
import { promptTurn, runTurnLoop, type TurnErrors, type TurnFrameOptions, type TurnOutcome, turnFrame } from './turn-loop.js'
import { addUsage, finishOf, type ResponseUsage, stepUsage } from './usage.js'

/** Model steps (requests) one turn may take before it ends with `DRIVER_OPENAI_MAX_STEPS` (default 32). */
export const DEFAULT_MAX_STEPS = 32

const ERRORS: TurnErrors = {
  invalidOptions: (message) => new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', message),
  requestFailed: (message) => new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', message),
  maxSteps: (message) => new DriverOpenAIError('DRIVER_OPENAI_MAX_STEPS', message),
}

export interface AgentTurnOptions extends TurnFrameOptions {
  readonly client: ModelClient
  /** A model override for this turn (e.g. the child's descriptor setting). */
  readonly model?: string
}

/** How a turn ended; a failure's `error` is typed (a `DriverOpenAIError`, or the `DshError` that ended it). */
export type AgentTurnOutcome = TurnOutcome

/**
 * One turn of an agent: `turn/start`, then model steps until the model
 * answers without tool calls — streamed deltas as `assistant/chunk` (and
 * `assistant/reasoning`), each requested call as `tool/call` followed by its
 * `tool/result`, the answer as `assistant/message` with the turn's summed
 * usage — then `turn/end`.
 *
 * Invariants: the turn is always closed while the session is open (an abort
 * ends it with `abortReason`, a failure with `assistant/error` then
 * `turn/end {reason: 'error'}`); every `tool/call` gets a `tool/result`
 * before the turn ends; nothing already appended is rewritten or repeated.
 * Every request is built from the session's context (`@dsh/session-context`),
 * which is folded from the log, so what the model sees is exactly what a
 * later resume would see. Each model call is framed by `step/start {model,
 * provider}` and `step/end {usage, finish}` (that step's own usage; a call
 * that failed ends `{finish: 'error'}` with the usage the server reported
 * before it failed, if any).
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnOutcome> {
  const { client, session, turn, tools, signal } = options
  const frame = turnFrame(options, (text) => client.redact(text), DEFAULT_MAX_STEPS, ERRORS)
  const definitions = toolDefinitions(tools)
  const model = options.model ?? client.model
  let usage: ResponseUsage = { input: 0, output: 0, cacheRead: 0, reasoning: 0 }
  let sawUsage = false
  return runTurnLoop({
    ...frame,
    request: () =>
      requestOf(client, session, model, {
        ...(options.context === undefined ? {} : { context: options.context }),
        ...(options.notices === undefined ? {} : { notices: options.notices }),
        ...(options.system === undefined ? {} : { system: options.system }),
        ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
        signal,
      }),
    stepStart: () => ({ model, provider: client.provider, ...(client.api === 'responses' ? { api: RESPONSES_API } : {}) }),
    async call(request, deltas) {
      const result = await client.step({
        ...request,
        tools: definitions,
        signal,
        ...(options.model === undefined ? {} : { model: options.model }),
        onContent: deltas.text,
        onReasoning: deltas.reasoning,
      })
      if (result.usage !== undefined) {
        usage = addUsage(usage, result.usage)
        sawUsage = true
      }
      return {
        calls: result.toolCalls,
        stepEnd: {
          ...(result.usage === undefined ? {} : { usage: stepUsage(result.usage) }),
          finish: finishOf(result.finishReason, result.toolCalls.length > 0),
          ...(result.responseId === undefined ? {} : { responseId: result.responseId }),
        },
        text: result.text,
        answer: { turn, text: result.text, ...(sawUsage ? { usage: { ...usage } } : {}), provider: client.provider, model },
      }
    },
    failedUsage: (error) => (error instanceof DriverOpenAIError && error.usage !== undefined ? stepUsage(error.usage) : undefined),
  })
}

/**
 * The body of the next step's request in the client's API: Chat messages, or
 * Responses input items continuing the session's chain (see
 * `requestInput`) with the system prompt as `instructions`.
 */
async function requestOf(
  client: ModelClient,
  session: Session,
  model: string,
  options: RequestOptions,
): Promise<{ readonly messages: NonNullable<StepRequest['messages']> } | { readonly responses: NonNullable<StepRequest['responses']> }> {
  if (client.api !== 'responses') return { messages: await requestMessages(session, options) }
  const { input, previous } = await requestInput(session, { provider: client.provider, model }, options)
  return {
    responses: {
      input,
      ...(previous === undefined ? {} : { previous_response_id: previous.id }),
      ...(options.system === undefined || options.system.length === 0 ? {} : { instructions: options.system }),
    },
  }
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
