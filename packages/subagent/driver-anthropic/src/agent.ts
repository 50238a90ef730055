import { isDshError } from '@dsh/context'
import { budgetCompaction, type CompactionSource, loggedArguments, type Notices, nextTurn, runTool } from '@dsh/driver-openai'
import type { Session, SessionEvent, StepFinish, TurnEndReason } from '@dsh/session'
import type { SubagentTool } from '@dsh/subagent'
import { DriverAnthropicError } from './errors.js'
import type { AnthropicClient } from './model.js'
import { type AttachmentSource, type ContextSource, requestParts } from './requests.js'
import type { AnthropicStep } from './stream.js'
import { anthropicTools } from './tools.js'
import { type AnthropicUsage, addUsage, finishOf, NO_USAGE, tokenUsage } from './usage.js'

/** Model steps (requests) one turn may take before it ends with `DRIVER_ANTHROPIC_MAX_STEPS` (default 32). */
export const DEFAULT_MAX_STEPS = 32

export interface AgentTurnOptions {
  readonly client: AnthropicClient
  readonly session: Session
  /** The turn number for `turn/start` … `turn/end`. */
  readonly turn: number
  /** The tools the runtime gives this agent (already filtered). */
  readonly tools: readonly SubagentTool[]
  readonly signal: AbortSignal
  /** How an aborted turn ends: `interrupted` for a top-level agent (Ctrl-C), `cancelled` under the subagent runtime. */
  readonly abortReason: 'interrupted' | 'cancelled'
  readonly maxSteps?: number
  /** A system prompt placed before the context's own system text. */
  readonly system?: string
  /** A model override for this turn (e.g. the child's descriptor setting). */
  readonly model?: string
  /** How the model reads a child's notice (`subagent/notice`); default: the shared driver phrasing. */
  readonly notices?: Notices
  /** The `sessionContext` service (or a getter for it); without one the driver folds the same unit itself. */
  readonly context?: ContextSource
  /** The `compaction` service (or a getter for it); with `contextWindow`, each step first compacts at `contextWindow * compactAt`. */
  readonly compaction?: CompactionSource
  /** The model's context window, in tokens (the budget trigger's `window`). */
  readonly contextWindow?: number
  /** The fraction of `contextWindow` at which a step compacts first (default the service's, 0.8). */
  readonly compactAt?: number
  /** Where the bytes of images and PDFs stored beside a session come from (one reader per session). */
  readonly attachments?: AttachmentSource
  /** Called after each event this turn appends (the CLI prints from it). Must not append. */
  readonly onEvent?: (event: SessionEvent) => void
}

export interface AgentTurnOutcome {
  readonly reason: TurnEndReason
  /** The final assistant text, when the model produced one. */
  readonly text?: string
  /** The typed error, when `reason` is `error`. */
  readonly error?: DriverAnthropicError | unknown
}

/**
 * One turn of an agent over the Messages API: `turn/start`, then model steps
 * until the model answers without tool calls, then `turn/end`. Each step is
 * `step/start {model, provider}`; the streamed thinking as
 * `assistant/reasoning` and text as `assistant/chunk`; the whole step as
 * `assistant/message {text, blocks}` — its reasoning with the signature the
 * API needs to accept it back, its text and its tool calls, so the next
 * request sends them back verbatim; each call mirrored as `tool/call`;
 * `step/end {usage, finish, responseId}`; then each call's `tool/result`.
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
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS
  if (!Number.isSafeInteger(maxSteps) || maxSteps < 1) {
    throw new DriverAnthropicError('DRIVER_ANTHROPIC_INVALID_OPTIONS', `maxSteps must be a positive integer, got ${String(maxSteps)}.`)
  }
  // Whatever the server sends back goes through the redactor first: the key never reaches the log.
  const append = (type: string, data: unknown): void => {
    const json = JSON.stringify(data)
    const clean = client.redact(json)
    const event = session.append(type, clean === json ? data : JSON.parse(clean))
    options.onEvent?.(event)
  }
  const budget = budgetOf(options)
  const definitions = anthropicTools(tools)
  let chunkIndex = 0
  let reasoningIndex = 0
  let text: string | undefined
  const end = (reason: TurnEndReason, error?: unknown): AgentTurnOutcome => {
    if (reason === 'error' && error !== undefined) {
      const typed = isDshError(error)
        ? error
        : new DriverAnthropicError('DRIVER_ANTHROPIC_REQUEST_FAILED', client.redact(String(error instanceof Error ? error.message : error)))
      if (!session.closed) append('assistant/error', { turn, code: typed.code, message: client.redact(typed.message) })
      error = typed
    }
    if (!session.closed && session.openTurnBefore() === turn) append('turn/end', { turn, reason })
    return { reason, ...(text === undefined ? {} : { text }), ...(error === undefined ? {} : { error }) }
  }

  append('turn/start', { turn })
  const model = options.model ?? client.model
  let usage: AnthropicUsage = NO_USAGE
  let sawUsage = false
  try {
    for (let step = 0; step < maxSteps; step++) {
      if (signal.aborted) return end(options.abortReason)
      if (budget !== undefined) {
        // Never throws: a failed compaction is in the log (`compaction/end {error}`) and the request goes ahead.
        await budget(session, signal)
        if (signal.aborted) return end(options.abortReason)
      }
      const parts = await requestParts(session, {
        ...(options.context === undefined ? {} : { context: options.context }),
        ...(options.notices === undefined ? {} : { notices: options.notices }),
        ...(options.system === undefined ? {} : { system: options.system }),
        ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
        signal,
      })
      append('step/start', { model, provider: client.provider })
      let result: AnthropicStep
      try {
        result = await client.step({
          ...parts,
          tools: definitions,
          signal,
          ...(options.model === undefined ? {} : { model: options.model }),
          onText: (delta) => append('assistant/chunk', { turn, index: chunkIndex++, delta }),
          onThinking: (delta) => append('assistant/reasoning', { turn, index: reasoningIndex++, delta }),
        })
      } catch (error) {
        const finish: StepFinish = signal.aborted || isDshError(error, 'CANCELLED') ? 'aborted' : 'error'
        if (!session.closed) append('step/end', { finish })
        throw error
      }
      const calls = result.toolCalls
      const stepEnd = {
        ...(result.usage === undefined ? {} : { usage: tokenUsage(result.usage) }),
        finish: finishOf(result.stopReason, calls.length > 0),
        ...(result.responseId === undefined ? {} : { responseId: result.responseId }),
      }
      if (result.usage !== undefined) {
        usage = addUsage(usage, result.usage)
        sawUsage = true
      }
      const message = { turn, text: result.text, blocks: result.blocks, provider: client.provider, model }
      if (calls.length === 0) {
        text = result.text
        append('assistant/message', { ...message, ...(sawUsage ? { usage: tokenUsage(usage) } : {}) })
        append('step/end', stepEnd)
        return end('completed')
      }
      // The step's message (its signed thinking and its calls) is logged before any tool runs, and each
      // call is mirrored as tool/call, so a crash leaves calls a repair can answer, never a result without its call.
      append('assistant/message', message)
      for (const call of calls) append('tool/call', { turn, callId: call.id, name: call.name, arguments: loggedArguments(call.arguments) })
      append('step/end', stepEnd)
      for (const call of calls) {
        const outcome = signal.aborted
          ? { content: { code: 'CANCELLED', message: 'The turn was interrupted before this tool ran.' }, isError: true }
          : await runTool(tools, call.name, call.arguments, session, signal)
        append('tool/result', { turn, callId: call.id, content: outcome.content, ...(outcome.isError ? { isError: true } : {}) })
      }
    }
    return end(
      'error',
      new DriverAnthropicError(
        'DRIVER_ANTHROPIC_MAX_STEPS',
        `The model called tools in ${maxSteps} consecutive steps without answering; the turn was stopped.`,
      ),
    )
  } catch (error) {
    if (signal.aborted || isDshError(error, 'CANCELLED')) return end(options.abortReason)
    return end('error', error)
  }
}

/** The turn's budget trigger: present when both the compaction service and the window are given. */
function budgetOf(options: AgentTurnOptions): ReturnType<typeof budgetCompaction> | undefined {
  const { compaction, contextWindow, compactAt } = options
  if (contextWindow !== undefined && (!Number.isSafeInteger(contextWindow) || contextWindow < 1)) {
    throw new DriverAnthropicError(
      'DRIVER_ANTHROPIC_INVALID_OPTIONS',
      `contextWindow must be a positive integer (tokens), got ${String(contextWindow)}.`,
    )
  }
  if (compactAt !== undefined && !(compactAt > 0 && compactAt <= 1)) {
    throw new DriverAnthropicError('DRIVER_ANTHROPIC_INVALID_OPTIONS', `compactAt must be a fraction in (0, 1], got ${String(compactAt)}.`)
  }
  if (compaction === undefined || contextWindow === undefined) return undefined
  return budgetCompaction({ compaction, window: contextWindow, ...(compactAt === undefined ? {} : { fraction: compactAt }) })
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
    throw new DriverAnthropicError(
      'DRIVER_ANTHROPIC_INVALID_OPTIONS',
      `Session '${options.session.id}' has turn ${open} open; close it (load the session to repair it) before running another.`,
    )
  }
  if (prompt !== undefined) {
    const event = options.session.append('user/message', { text: prompt })
    options.onEvent?.(event)
  }
  return runAgentTurn({ ...rest, turn: nextTurn(options.session), abortReason: 'interrupted' })
}
