import { type DshError, isDshError } from '@dsh/context'
import type { Session, SessionEvent, StepFinish, TokenUsage, TurnEndReason } from '@dsh/session'
import type { SubagentRun, SubagentSettings } from '@dsh/subagent'
import { budgetCompaction, type CompactionSource } from './budget.js'
import type { Notices } from './notices.js'
import type { AttachmentSource, ContextSource } from './requests.js'
import { type AgentTool, loggedArguments, runTool } from './tools.js'

/** The typed errors of one driver (each driver has its own class and codes). */
export interface TurnErrors {
  /** Bad options (`…_INVALID_OPTIONS`). */
  readonly invalidOptions: (message: string) => DshError
  /** A failure that is none of ours, e.g. a dropped connection (`…_REQUEST_FAILED`). */
  readonly requestFailed: (message: string) => DshError
  /** A turn that called tools in every step it may take (`…_MAX_STEPS`). */
  readonly maxSteps: (message: string) => DshError
}

/** A tool call a model step asked for: its raw JSON arguments may be malformed (the tool runner tells the model). */
export interface StepToolCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

/** One model step, in the log's shapes (built by the driver from its API's answer). */
export interface LoopStep {
  readonly calls: readonly StepToolCall[]
  /** `step/end`: the step's own usage, its finish and the response id. */
  readonly stepEnd: Readonly<Record<string, unknown>>
  /** The answer's text (a step without calls ends the turn with it). */
  readonly text: string
  /** The answer's `assistant/message` (a step without calls), with the turn's summed usage. */
  readonly answer: Readonly<Record<string, unknown>>
  /** A step with calls: its own `assistant/message`, logged before its calls (undefined: none). */
  readonly callsMessage?: Readonly<Record<string, unknown>>
}

/** Where a step's streamed deltas go (`assistant/chunk`, `assistant/reasoning`, numbered within the turn). */
export interface StepDeltas {
  readonly text: (delta: string) => void
  readonly reasoning: (delta: string) => void
}

/** The turn's frame: what every driver fills the same way (`turnFrame`). */
export interface TurnFrame {
  readonly session: Session
  readonly turn: number
  readonly tools: readonly AgentTool[]
  readonly signal: AbortSignal
  /** How an aborted turn ends: `interrupted` for a top-level agent (Ctrl-C), `cancelled` under the subagent runtime. */
  readonly abortReason: 'interrupted' | 'cancelled'
  readonly maxSteps: number
  /** The budget trigger, called before each request. */
  readonly budget?: ReturnType<typeof budgetCompaction>
  /** Redacts the API key from text the server sent back, before anything is logged. */
  readonly redact: (text: string) => string
  readonly errors: TurnErrors
  /** Called after each event the turn appends. Must not append. */
  readonly onEvent?: (event: SessionEvent) => void
}

/** What the turn loop needs of one driver, over its API's requests `R`. */
export interface TurnLoop<R> extends TurnFrame {
  /** The next step's request, built from the session's context. */
  request(): Promise<R>
  /** `step/start`'s data (model, provider, API). */
  stepStart(): Readonly<Record<string, unknown>>
  /** Sends the request, streaming deltas, and returns the step. */
  call(request: R, deltas: StepDeltas): Promise<LoopStep>
  /**
   * The usage the server reported before a call failed (from the error
   * `call` threw), in the log's shape: those tokens were spent, so the
   * step's `step/end` records them with its failure. Undefined: none.
   */
  failedUsage(error: unknown): TokenUsage | undefined
}

export interface TurnOutcome {
  readonly reason: TurnEndReason
  /** The final assistant text, when the model produced one. */
  readonly text?: string
  /** The typed error, when `reason` is `error`. */
  readonly error?: unknown
}

/**
 * One turn of an agent, whatever the API: `turn/start`, then model steps
 * until the model answers without tool calls, then `turn/end`. Each step is
 * `step/start`, its streamed deltas, then either the answer (`assistant/message`
 * with the turn's summed usage, `step/end`) or its calls (the step's own
 * message when the API has one, each call as `tool/call`, `step/end`, then
 * each call's `tool/result`). A step whose call fails ends `step/end
 * {finish: 'error'}` (`'aborted'` when cancelled), with the usage the server
 * reported before the failure when it reported any.
 *
 * Invariants: the turn is always closed while the session is open (an abort
 * ends it with `abortReason`, a failure with `assistant/error` then
 * `turn/end {reason: 'error'}`); every `tool/call` gets a `tool/result`
 * before the turn ends; nothing already appended is rewritten or repeated;
 * whatever the server sent goes through `redact` before it is logged.
 */
export async function runTurnLoop<R>(loop: TurnLoop<R>): Promise<TurnOutcome> {
  const { session, turn, tools, signal, errors } = loop
  const append = (type: string, data: unknown): void => {
    const json = JSON.stringify(data)
    const clean = loop.redact(json)
    const event = session.append(type, clean === json ? data : JSON.parse(clean))
    loop.onEvent?.(event)
  }
  let chunkIndex = 0
  let reasoningIndex = 0
  const deltas: StepDeltas = {
    text: (delta) => append('assistant/chunk', { turn, index: chunkIndex++, delta }),
    reasoning: (delta) => append('assistant/reasoning', { turn, index: reasoningIndex++, delta }),
  }
  let text: string | undefined
  const end = (reason: TurnEndReason, error?: unknown): TurnOutcome => {
    if (reason === 'error' && error !== undefined) {
      const typed = isDshError(error) ? error : errors.requestFailed(loop.redact(String(error instanceof Error ? error.message : error)))
      if (!session.closed) append('assistant/error', { turn, code: typed.code, message: loop.redact(typed.message) })
      error = typed
    }
    if (!session.closed && session.openTurnBefore() === turn) append('turn/end', { turn, reason })
    return { reason, ...(text === undefined ? {} : { text }), ...(error === undefined ? {} : { error }) }
  }

  append('turn/start', { turn })
  try {
    for (let step = 0; step < loop.maxSteps; step++) {
      if (signal.aborted) return end(loop.abortReason)
      if (loop.budget !== undefined) {
        // Never throws: a failed compaction is in the log (`compaction/end {error}`) and the request goes ahead.
        await loop.budget(session, signal)
        if (signal.aborted) return end(loop.abortReason)
      }
      const request = await loop.request()
      append('step/start', loop.stepStart())
      let result: LoopStep
      try {
        result = await loop.call(request, deltas)
      } catch (error) {
        const finish: StepFinish = signal.aborted || isDshError(error, 'CANCELLED') ? 'aborted' : 'error'
        const usage = loop.failedUsage(error)
        if (!session.closed) append('step/end', { ...(usage === undefined ? {} : { usage }), finish })
        throw error
      }
      if (result.calls.length === 0) {
        text = result.text
        append('assistant/message', result.answer)
        append('step/end', result.stepEnd)
        return end('completed')
      }
      // The step's calls are logged before any runs, then each gets its result in order, so a
      // crash leaves calls a repair can answer, never a result without its call.
      if (result.callsMessage !== undefined) append('assistant/message', result.callsMessage)
      for (const call of result.calls)
        append('tool/call', { turn, callId: call.id, name: call.name, arguments: loggedArguments(call.arguments) })
      append('step/end', result.stepEnd)
      for (const call of result.calls) {
        const outcome = signal.aborted
          ? { content: { code: 'CANCELLED', message: 'The turn was interrupted before this tool ran.' }, isError: true }
          : await runTool(tools, call.name, call.arguments, session, signal)
        append('tool/result', { turn, callId: call.id, content: outcome.content, ...(outcome.isError ? { isError: true } : {}) })
      }
    }
    return end(
      'error',
      errors.maxSteps(`The model called tools in ${loop.maxSteps} consecutive steps without answering; the turn was stopped.`),
    )
  } catch (error) {
    if (signal.aborted || isDshError(error, 'CANCELLED')) return end(loop.abortReason)
    return end('error', error)
  }
}

/** The settings of a turn every driver takes the same, in its own options and in each turn's. */
export interface TurnSettings {
  /** Model steps one turn may take (default 32). */
  readonly maxSteps?: number
  /** The system prompt, before the context's own system text (in a driver's options: for every agent, before each child's persona and instructions). */
  readonly system?: string
  /** How the model reads a child's notice (`subagent/notice`); default: the shared phrasing. */
  readonly notices?: Notices
  /**
   * The `sessionContext` service the requests are built from, or a getter for
   * it (the host that provides it is usually made after the driver); without
   * one the driver folds the same unit itself, kept per session.
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
  /** The model's context window in tokens: the budget trigger compacts at `contextWindow * compactAt`. */
  readonly contextWindow?: number
  /** The fraction of the window at which a step compacts first (default 0.8). */
  readonly compactAt?: number
}

/** A turn's options, as every driver takes them (a driver adds its client and a model override). */
export interface TurnFrameOptions extends TurnSettings {
  readonly session: Session
  /** The turn number for `turn/start` … `turn/end`. */
  readonly turn: number
  /** The tools the runtime gives this agent (already filtered). */
  readonly tools: readonly AgentTool[]
  readonly signal: AbortSignal
  /** How an aborted turn ends: `interrupted` for a top-level agent (Ctrl-C), `cancelled` under the subagent runtime. */
  readonly abortReason: 'interrupted' | 'cancelled'
  /** Called after each event this turn appends (the CLI prints from it). Must not append. */
  readonly onEvent?: (event: SessionEvent) => void
}

/**
 * A turn's frame from a driver's turn options: the step limit (default
 * `defaultMaxSteps`) and the budget trigger (present when both the
 * compaction service and the window are given); a bad limit, window or
 * fraction is the driver's `…_INVALID_OPTIONS`.
 */
export function turnFrame(
  options: TurnFrameOptions,
  redact: (text: string) => string,
  defaultMaxSteps: number,
  errors: TurnErrors,
): TurnFrame {
  const maxSteps = options.maxSteps ?? defaultMaxSteps
  if (!Number.isSafeInteger(maxSteps) || maxSteps < 1)
    throw errors.invalidOptions(`maxSteps must be a positive integer, got ${String(maxSteps)}.`)
  const { compaction, contextWindow, compactAt } = options
  if (contextWindow !== undefined && (!Number.isSafeInteger(contextWindow) || contextWindow < 1))
    throw errors.invalidOptions(`contextWindow must be a positive integer (tokens), got ${String(contextWindow)}.`)
  if (compactAt !== undefined && !(compactAt > 0 && compactAt <= 1))
    throw errors.invalidOptions(`compactAt must be a fraction in (0, 1], got ${String(compactAt)}.`)
  const budget =
    compaction === undefined || contextWindow === undefined
      ? undefined
      : budgetCompaction({ compaction, window: contextWindow, ...(compactAt === undefined ? {} : { fraction: compactAt }) })
  return {
    session: options.session,
    turn: options.turn,
    tools: options.tools,
    signal: options.signal,
    abortReason: options.abortReason,
    maxSteps,
    ...(budget === undefined ? {} : { budget }),
    redact,
    errors,
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
  }
}

/**
 * Opens a top-level agent's turn for one prompt: the session must have no
 * open turn (a loaded session has had crash repair), the prompt (if any) is
 * appended as `user/message`; returns the new turn's number.
 */
export function promptTurn(
  session: Session,
  prompt: string | undefined,
  errors: Pick<TurnErrors, 'invalidOptions'>,
  onEvent?: (event: SessionEvent) => void,
): number {
  const open = session.openTurnBefore()
  if (open !== undefined)
    throw errors.invalidOptions(
      `Session '${session.id}' has turn ${open} open; close it (load the session to repair it) before running another.`,
    )
  if (prompt !== undefined) {
    const event = session.append('user/message', { text: prompt })
    onEvent?.(event)
  }
  return session.nextTurn()
}

/** What a driver's own options give each subagent run's turn (every driver takes the same). */
export interface SubagentTurnDefaults extends TurnSettings {
  /** Called after each event a run appends (the CLI prints progress from it). Must not append. */
  readonly onEvent?: (run: SubagentRun, event: SessionEvent) => void
}

/**
 * A subagent run's turn options (all but the driver's client): the run's
 * session, turn, tools and signal; interrupts end the turn `cancelled`, the
 * runtime's reason for it; the run's settings supply the model (`model`,
 * else `agentModel`) and the system prompt (`systemPrompt`); the rest comes
 * from the driver's options.
 */
export function subagentTurn(run: SubagentRun, options: SubagentTurnDefaults): TurnFrameOptions & { readonly model?: string } {
  const settings = run.settings
  const model = settings?.model ?? settings?.agentModel
  const system = systemPrompt(options.system, settings)
  return {
    session: run.session,
    turn: run.turn,
    tools: run.tools,
    signal: run.signal,
    abortReason: 'cancelled' as const,
    ...(model === undefined ? {} : { model }),
    ...(system === undefined ? {} : { system }),
    ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
    ...(options.notices === undefined ? {} : { notices: options.notices }),
    ...(options.context === undefined ? {} : { context: options.context }),
    ...(options.attachments === undefined ? {} : { attachments: options.attachments }),
    ...(options.compaction === undefined ? {} : { compaction: options.compaction }),
    ...(options.contextWindow === undefined ? {} : { contextWindow: options.contextWindow }),
    ...(options.compactAt === undefined ? {} : { compactAt: options.compactAt }),
    ...(options.onEvent === undefined ? {} : { onEvent: (event: SessionEvent) => options.onEvent?.(run, event) }),
  }
}

/** The system prompt of a run: the driver's own, then the child's persona, instructions and output contract. */
export function systemPrompt(base: string | undefined, settings: SubagentSettings | undefined): string | undefined {
  const parts = [base, settings?.persona, settings?.instructions]
  if (settings?.outputSchema !== undefined) {
    parts.push(
      `Your final answer must be a single JSON value (no prose, no code fence) valid against this JSON Schema:\n${JSON.stringify(settings.outputSchema)}`,
    )
  }
  const text = parts.filter((part): part is string => typeof part === 'string' && part.trim().length > 0).join('\n\n')
  return text.length === 0 ? undefined : text
}
