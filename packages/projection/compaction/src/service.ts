import { randomUUID } from 'node:crypto'
import { isDshError, raceAbort, throwIfAborted } from '@dsh/context'
import type { ContentBlock, JsonValue, Session } from '@dsh/session'
import { type ContextMessage, PRUNED_RESULT_TEXT, type SessionContext, type SessionContextService } from '@dsh/session-context'
import { CompactionError } from './errors.js'
import { blockText, estimateMessageTokens, estimateTokens } from './estimate.js'
import { type ShadowedRange, shadowedRange } from './range.js'
import { storedError, summaryData } from './summary.js'
import type {
  CompactionService,
  CompactionServiceOptions,
  CompactOptions,
  CompactResult,
  MaybeCompactOptions,
  PruneOptions,
  PruneResult,
  SessionAttachments,
  Summarizer,
} from './types.js'

export const DEFAULT_KEEP = 4
export const DEFAULT_FRACTION = 0.8
export const DEFAULT_PRUNE_MIN_CHARS = 2_000
export const DEFAULT_PRUNE_KEEP_NEWEST = 4
export const DEFAULT_INSTRUCTION =
  'Summarize the conversation above for a model that will continue it without seeing it: the task and its goal, ' +
  'decisions made and why, facts learned (files, names, values, errors), what was done and what remains. ' +
  'Be complete and concise; write only the summary.'

/** The `error` of the `compaction/end` that ends a compaction whose summary would not shrink the context. */
export const NO_GAIN_COMPACTION_ERROR = 'no-gain'

export interface CompactionDependencies {
  readonly context: () => SessionContextService
  /** Makes the session's events durable (the store's `flush`). */
  readonly flush: (session: Session) => Promise<void>
  readonly summarizer: () => Summarizer | undefined
  /** Where the bytes of the shadowed messages' images and files come from (one reader per compaction); without it none are read. */
  readonly attachments?: (session: Session) => SessionAttachments
}

const wholeNumber = (value: unknown, name: string, min: number): number => {
  if (!Number.isSafeInteger(value) || (value as number) < min)
    throw new CompactionError('COMPACTION_INVALID_OPTIONS', `${name} must be a whole number >= ${min}, got ${JSON.stringify(value)}.`)
  return value as number
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const cancelled = (): CompactionError =>
  new CompactionError('CANCELLED', 'The compaction was cancelled by its caller (AbortSignal aborted); the context is unchanged.')

/** The `compaction` service over the `sessionContext` service, the store's flush and a summarizer. */
export function createCompactionService(deps: CompactionDependencies, options: CompactionServiceOptions = {}): CompactionService {
  const keepDefault = wholeNumber(options.keep ?? DEFAULT_KEEP, 'keep', 0)
  const fractionDefault = options.fraction ?? DEFAULT_FRACTION
  checkFraction(fractionDefault)
  const instructionDefault = options.instruction ?? DEFAULT_INSTRUCTION
  const busy = new Set<string>()

  const live = (session: Session): Session => {
    if (typeof session?.append !== 'function' || session.closed)
      throw new CompactionError('COMPACTION_INVALID_OPTIONS', 'Compaction writes to a live, open session: load or restore it first.')
    return session
  }

  const step = async (session: Session, stage: 'started' | 'summarized' | 'ended', id: string): Promise<void> => {
    await deps.flush(session)
    await options.onProgress?.(stage, session, id)
  }

  /**
   * The `compaction/summary` data of the summarizer's answer for `range`,
   * after reading the bytes of the attachments the range references (the
   * summarizer renders them as a driver's step does). A failed read, a
   * rejection, an answer that cannot be stored (see `summaryData`) or an
   * abort of `signal` (not waiting for a summarizer that ignores it) throws
   * typed; the caller ends the compaction.
   */
  const summarize = async (
    summarizer: Summarizer,
    session: Session,
    context: SessionContext,
    range: ShadowedRange,
    compactionId: string,
    request: CompactOptions,
  ): Promise<JsonValue> => {
    let answer: unknown
    try {
      answer = await raceAbort(
        Promise.resolve().then(async () => {
          const attachments = deps.attachments?.(session)
          await attachments?.load(range.messages, request.signal)
          return summarizer.summarize({
            sessionId: session.id,
            context: { ...context, messages: range.messages },
            instruction: request.instruction ?? instructionDefault,
            ...(attachments === undefined ? {} : { attachments: attachments.resolve }),
            ...(request.signal === undefined ? {} : { signal: request.signal }),
          })
        }),
        request.signal,
        cancelled,
      )
    } catch (error) {
      if (isDshError(error, 'CANCELLED')) throw error
      throw summarizerFailed(session, messageOf(error), error)
    }
    const checked = summaryData(answer, compactionId, range, session.seq)
    if ('error' in checked) throw summarizerFailed(session, checked.error)
    return checked.data
  }

  /** Appends `compaction/end {error}` for a compaction that stopped, and tries to make it durable (the caller throws why it stopped). */
  const endFailed = async (session: Session, compactionId: string, error: unknown): Promise<void> => {
    const reason = isDshError(error) ? error.details?.reason : undefined
    const why = isDshError(error, 'CANCELLED') ? 'cancelled' : typeof reason === 'string' ? reason : messageOf(error)
    try {
      session.append('compaction/end', { compactionId, error: storedError(why) })
      await deps.flush(session)
    } catch {
      // The session was closed or persistence is failing: the end stays in memory (or a load's crash repair writes it).
    }
  }

  const compact = async (session: Session, request: CompactOptions): Promise<CompactResult> => {
    live(session)
    const keep = wholeNumber(request.keep ?? keepDefault, 'keep', 0)
    if (typeof request.reason !== 'string' || request.reason.length === 0)
      throw new CompactionError('COMPACTION_INVALID_OPTIONS', 'compact needs a reason (e.g. "manual" or "budget").')
    const summarizer = deps.summarizer()
    if (summarizer === undefined)
      throw new CompactionError('COMPACTION_NO_SUMMARIZER', 'No summarizer service is available: activate a driver that provides one.')
    if (busy.has(session.id))
      throw new CompactionError('COMPACTION_BUSY', `Session '${session.id}' is being compacted already; wait for that compaction to end.`)
    busy.add(session.id)
    try {
      const context = await deps.context().contextOf(session, request.signal)
      if (context.compacting)
        throw new CompactionError(
          'COMPACTION_BUSY',
          `Session '${session.id}' holds an unfinished compaction; load it again so crash repair closes it.`,
        )
      const range = shadowedRange(context.messages, keep, context.seq + 1)
      if (range === undefined)
        throw new CompactionError(
          'COMPACTION_NOTHING_TO_COMPACT',
          `Session '${session.id}' has ${context.messages.length} context message(s); keeping ${keep} leaves nothing new to summarize.`,
        )
      throwIfAborted(request.signal, cancelled)
      const compactionId = randomUUID()
      session.append('compaction/start', { compactionId, reason: request.reason })
      let ended = false
      try {
        await step(session, 'started', compactionId)
        const data = await summarize(summarizer, session, context, range, compactionId, request)
        // The summary is stored even when it is not applied: its usage was spent, and the log shows what the model wrote.
        session.append('compaction/summary', data)
        checkGain(session, range, data)
        await step(session, 'summarized', compactionId)
        session.append('compaction/end', { compactionId })
        ended = true
        await step(session, 'ended', compactionId)
      } catch (error) {
        // Whatever stopped the compaction after its start ends it, so the session is not left compacting.
        if (!ended) await endFailed(session, compactionId, error)
        throw error
      }
      const after = await deps.context().contextOf(session, request.signal)
      return {
        compactionId,
        from: range.from,
        to: range.to,
        shadowed: range.messages.length,
        tokensBefore: estimateTokens(context),
        tokensAfter: estimateTokens(after),
      }
    } finally {
      busy.delete(session.id)
    }
  }

  const prune = async (session: Session, request: PruneOptions = {}): Promise<PruneResult> => {
    live(session)
    const minChars = wholeNumber(request.minChars ?? DEFAULT_PRUNE_MIN_CHARS, 'minChars', 1)
    const keepNewest = wholeNumber(request.keepNewest ?? DEFAULT_PRUNE_KEEP_NEWEST, 'keepNewest', 0)
    const context = await deps.context().contextOf(session)
    const results = prunable(context)
    const old = results.slice(0, Math.max(0, results.length - keepNewest)).filter((r) => r.chars >= minChars)
    if (old.length === 0) return { callIds: [], chars: 0 }
    const callIds = old.map((r) => r.callId)
    session.append('compaction/prune', { callIds, ...(request.placeholder === undefined ? {} : { placeholder: request.placeholder }) })
    await deps.flush(session)
    return { callIds, chars: old.reduce((n, r) => n + r.chars, 0) }
  }

  const estimate = async (session: Session, signal?: AbortSignal): Promise<number> =>
    estimateTokens(await deps.context().contextOf(live(session), signal))

  return {
    compact,
    prune,
    estimate,
    async maybeCompact(session, request: MaybeCompactOptions) {
      const window = wholeNumber(request.window, 'window', 1)
      const fraction = request.fraction ?? fractionDefault
      checkFraction(fraction)
      const tokens = await estimate(session, request.signal)
      const budget = Math.floor(window * fraction)
      if (tokens < budget) return { estimate: tokens, budget, compaction: undefined }
      const compaction = await compact(session, {
        reason: 'budget',
        ...(request.keep === undefined ? {} : { keep: request.keep }),
        ...(request.signal === undefined ? {} : { signal: request.signal }),
      })
      return { estimate: tokens, budget, compaction }
    },
  }
}

function summarizerFailed(session: Session, message: string, cause?: unknown): CompactionError {
  return new CompactionError(
    'COMPACTION_SUMMARIZER_FAILED',
    `Compaction of session '${session.id}' failed: ${message.replace(/\.$/, '')}. The context is unchanged.`,
    { details: { reason: message }, ...(cause === undefined ? {} : { cause }) },
  )
}

/**
 * Throws `COMPACTION_NO_GAIN` when the summary, as the one user message the
 * context would show, is estimated at no fewer tokens than the messages it
 * replaces: applying it would not shrink the context.
 */
function checkGain(session: Session, range: ShadowedRange, data: JsonValue): void {
  const blocks = (data as { summary: ContextMessage['blocks'] }).summary
  const summaryTokens = estimateMessageTokens({ role: 'user', blocks, seq: range.from })
  const rangeTokens = estimateTokens(range)
  if (summaryTokens < rangeTokens) return
  throw new CompactionError(
    'COMPACTION_NO_GAIN',
    `Compaction of session '${session.id}' was not applied: its summary is about ${summaryTokens} tokens, not fewer than the ${rangeTokens} of the ${range.messages.length} message(s) it would replace. The context is unchanged; compact when more of it can be summarized, or keep fewer messages verbatim.`,
    { details: { reason: NO_GAIN_COMPACTION_ERROR, summaryTokens, rangeTokens } },
  )
}

function checkFraction(fraction: unknown): void {
  if (typeof fraction !== 'number' || !(fraction > 0 && fraction <= 1))
    throw new CompactionError('COMPACTION_INVALID_OPTIONS', `fraction must be a number in (0, 1], got ${JSON.stringify(fraction)}.`)
}

/** The real (not synthetic, not already pruned) tool results of a context in order, with their text size. */
function prunable(context: SessionContext): { callId: string; chars: number }[] {
  const out: { callId: string; chars: number }[] = []
  for (const message of context.messages) {
    if (message.role !== 'tool' || message.synthetic === true) continue
    const block = message.blocks[0] as { type: string; callId?: unknown } | undefined
    if (block?.type !== 'tool-result' || typeof block.callId !== 'string') continue
    const text = blockText(block as ContentBlock)
    if (text === PRUNED_RESULT_TEXT) continue
    out.push({ callId: block.callId, chars: text.length })
  }
  return out
}
