import { isDshError } from '@dsh/context'
import type { Session, SessionEvent, StepFinish, TurnEndReason } from '@dsh/session'
import { budgetCompaction, type CompactionSource } from './budget.js'
import { DriverOpenAIError } from './errors.js'
import './events.js'
import { RESPONSES_API } from './chain.js'
import type { ModelClient } from './model.js'
import type { Notices } from './notices.js'
import { type AttachmentSource, type ContextSource, type RequestOptions, requestInput, requestMessages } from './requests.js'
import type { StepRequest } from './step.js'
import { type AgentTool, loggedArguments, runTool, toolDefinitions } from './tools.js'
import { addUsage, finishOf, type ModelUsage, stepUsage } from './usage.js'

/** Model steps (requests) one turn may take before it ends with `DRIVER_OPENAI_MAX_STEPS` (default 32). */
export const DEFAULT_MAX_STEPS = 32

export interface AgentTurnOptions {
  readonly client: ModelClient
  readonly session: Session
  /** The turn number for `turn/start` … `turn/end`. */
  readonly turn: number
  /** The tools the runtime gives this agent (already filtered). */
  readonly tools: readonly AgentTool[]
  readonly signal: AbortSignal
  /** How an aborted turn ends: `interrupted` for a top-level agent (Ctrl-C), `cancelled` under the subagent runtime. */
  readonly abortReason: 'interrupted' | 'cancelled'
  readonly maxSteps?: number
  /** A system prompt placed before the log's messages. */
  readonly system?: string
  /** A model override for this turn (e.g. the child's descriptor setting). */
  readonly model?: string
  /** How the model reads a child's notice (`subagent/notice`, settled or report); default: the driver's own phrasing. */
  readonly notices?: Notices
  /**
   * The `sessionContext` service (or a getter for it) the requests are built
   * from; without one the driver folds the same unit itself, kept per session.
   */
  readonly context?: ContextSource
  /**
   * Where the bytes of the images and files the context references come
   * from: one reader per session, e.g. `(session) =>
   * attachmentResolver(persistence, session.id)` of
   * `@dsh/session-persistence`. Without it an attachment is sent as a note
   * that it is missing.
   */
  readonly attachments?: AttachmentSource
  /**
   * The `compaction` service (or a getter for it). With `contextWindow`, each
   * step first compacts the session when its context's estimate reaches
   * `contextWindow * compactAt` (`budgetCompaction`); without either, no
   * step compacts.
   */
  readonly compaction?: CompactionSource
  /** The model's context window, in tokens (the budget trigger's `window`). */
  readonly contextWindow?: number
  /** The fraction of `contextWindow` at which a step compacts first (default the service's, 0.8). */
  readonly compactAt?: number
  /** Called after each event this turn appends (the CLI prints from it). Must not append. */
  readonly onEvent?: (event: SessionEvent) => void
}

export interface AgentTurnOutcome {
  readonly reason: TurnEndReason
  /** The final assistant text, when the model produced one. */
  readonly text?: string
  /** The typed error, when `reason` is `error`. */
  readonly error?: DriverOpenAIError | unknown
}

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
 * provider}` and `step/end {usage, finish}` (that step's own usage).
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnOutcome> {
  const { client, session, turn, tools, signal } = options
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS
  if (!Number.isSafeInteger(maxSteps) || maxSteps < 1) {
    throw new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', `maxSteps must be a positive integer, got ${String(maxSteps)}.`)
  }
  // Whatever the server sends back (an echoing proxy, a model repeating a header) goes
  // through the redactor first: the key never reaches the log.
  const append = (type: string, data: unknown): void => {
    const json = JSON.stringify(data)
    const clean = client.redact(json)
    const event = session.append(type, clean === json ? data : JSON.parse(clean))
    options.onEvent?.(event)
  }
  const budget = budgetOf(options)
  const definitions = toolDefinitions(tools)
  let chunkIndex = 0
  let reasoningIndex = 0
  let text: string | undefined
  const end = (reason: TurnEndReason, error?: unknown): AgentTurnOutcome => {
    if (reason === 'error' && error !== undefined) {
      const typed = isDshError(error)
        ? error
        : new DriverOpenAIError('DRIVER_OPENAI_REQUEST_FAILED', client.redact(String(error instanceof Error ? error.message : error)))
      if (!session.closed) append('assistant/error', { turn, code: typed.code, message: client.redact(typed.message) })
      error = typed
    }
    if (!session.closed && session.openTurnBefore() === turn) append('turn/end', { turn, reason })
    return { reason, ...(text === undefined ? {} : { text }), ...(error === undefined ? {} : { error }) }
  }

  append('turn/start', { turn })
  const model = options.model ?? client.model
  let usage: ModelUsage = { input: 0, output: 0, cacheRead: 0, reasoning: 0 }
  let sawUsage = false
  try {
    for (let step = 0; step < maxSteps; step++) {
      if (signal.aborted) return end(options.abortReason)
      if (budget !== undefined) {
        // Never throws: a failed compaction is in the log (`compaction/end {error}`) and the request goes ahead.
        await budget(session, signal)
        if (signal.aborted) return end(options.abortReason)
      }
      const request = await requestOf(client, session, model, {
        ...(options.context === undefined ? {} : { context: options.context }),
        ...(options.notices === undefined ? {} : { notices: options.notices }),
        ...(options.system === undefined ? {} : { system: options.system }),
        ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
        signal,
      })
      append('step/start', { model, provider: client.provider, ...(client.api === 'responses' ? { api: RESPONSES_API } : {}) })
      let result: Awaited<ReturnType<ModelClient['step']>>
      try {
        result = await client.step({
          ...request,
          tools: definitions,
          signal,
          ...(options.model === undefined ? {} : { model: options.model }),
          onContent: (delta) => append('assistant/chunk', { turn, index: chunkIndex++, delta }),
          onReasoning: (delta) => append('assistant/reasoning', { turn, index: reasoningIndex++, delta }),
        })
      } catch (error) {
        const finish: StepFinish = signal.aborted || isDshError(error, 'CANCELLED') ? 'aborted' : 'error'
        if (!session.closed) append('step/end', { finish })
        throw error
      }
      const stepEnd = {
        ...(result.usage === undefined ? {} : { usage: stepUsage(result.usage) }),
        finish: finishOf(result.finishReason, result.toolCalls.length > 0),
        ...(result.responseId === undefined ? {} : { responseId: result.responseId }),
      }
      if (result.usage !== undefined) {
        usage = addUsage(usage, result.usage)
        sawUsage = true
      }
      if (result.toolCalls.length === 0) {
        text = result.text
        append('assistant/message', {
          turn,
          text: result.text,
          ...(sawUsage ? { usage: { ...usage } } : {}),
          provider: client.provider,
          model,
        })
        append('step/end', stepEnd)
        return end('completed')
      }
      // Every call is logged before any runs, then each gets its result in order, so a
      // crash leaves calls a repair can answer, never a result without its call.
      for (const call of result.toolCalls)
        append('tool/call', { turn, callId: call.id, name: call.name, arguments: loggedArguments(call.arguments) })
      append('step/end', stepEnd)
      for (const call of result.toolCalls) {
        const outcome = signal.aborted
          ? { content: { code: 'CANCELLED', message: 'The turn was interrupted before this tool ran.' }, isError: true }
          : await runTool(tools, call.name, call.arguments, session, signal)
        append('tool/result', { turn, callId: call.id, content: outcome.content, ...(outcome.isError ? { isError: true } : {}) })
      }
    }
    return end(
      'error',
      new DriverOpenAIError(
        'DRIVER_OPENAI_MAX_STEPS',
        `The model called tools in ${maxSteps} consecutive steps without answering; the turn was stopped.`,
      ),
    )
  } catch (error) {
    if (signal.aborted || isDshError(error, 'CANCELLED')) return end(options.abortReason)
    return end('error', error)
  }
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

/** The turn's budget trigger: present when both the compaction service and the window are given; a bad window or fraction is `DRIVER_OPENAI_INVALID_OPTIONS`. */
function budgetOf(options: AgentTurnOptions): ReturnType<typeof budgetCompaction> | undefined {
  const { compaction, contextWindow, compactAt } = options
  if (contextWindow !== undefined && (!Number.isSafeInteger(contextWindow) || contextWindow < 1)) {
    throw new DriverOpenAIError(
      'DRIVER_OPENAI_INVALID_OPTIONS',
      `contextWindow must be a positive integer (tokens), got ${String(contextWindow)}.`,
    )
  }
  if (compactAt !== undefined && !(compactAt > 0 && compactAt <= 1)) {
    throw new DriverOpenAIError('DRIVER_OPENAI_INVALID_OPTIONS', `compactAt must be a fraction in (0, 1], got ${String(compactAt)}.`)
  }
  if (compaction === undefined || contextWindow === undefined) return undefined
  return budgetCompaction({ compaction, window: contextWindow, ...(compactAt === undefined ? {} : { fraction: compactAt }) })
}

/** One above the highest turn number in the log (1 for a fresh session). */
export function nextTurn(session: Session): number {
  let highest = 0
  for (const event of session.events) {
    if (event.type !== 'turn/start') continue
    const turn = (event.data as { turn?: unknown }).turn
    if (typeof turn === 'number' && turn > highest) highest = turn
  }
  return highest + 1
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
  const open = options.session.openTurnBefore()
  if (open !== undefined) {
    throw new DriverOpenAIError(
      'DRIVER_OPENAI_INVALID_OPTIONS',
      `Session '${options.session.id}' has turn ${open} open; close it (load the session to repair it) before running another.`,
    )
  }
  if (prompt !== undefined) {
    const event = options.session.append('user/message', { text: prompt })
    options.onEvent?.(event)
  }
  return runAgentTurn({ ...rest, turn: nextTurn(options.session), abortReason: 'interrupted' })
}
