import { popMessage, pushMessage } from './messages.js'
import type { ReadCounts } from './read.js'
import {
  type ContextBlock,
  type ContextMessage,
  FOLD_WARNINGS,
  type FoldWarning,
  type OpenAssistant,
  type SessionContextState,
} from './types.js'

/** A state being built by one `apply` (a shallow copy: fields are replaced, never mutated). */
export type Draft = { -readonly [K in keyof SessionContextState]: SessionContextState[K] }

/** The text a pruned tool result holds when `compaction/prune` names no placeholder. */
export const PRUNED_RESULT_TEXT = '[tool result pruned from the context]'

/** Compactions open at once that the state keeps; beginning another abandons the oldest. */
export const MAX_OPEN_COMPACTIONS = 8

export const NO_WARNINGS = Object.freeze(Object.fromEntries(FOLD_WARNINGS.map((w) => [w, 0]))) as SessionContextState['warnings']

export function initState(): SessionContextState {
  return {
    seq: -1,
    chunks: [],
    open: null,
    mirrors: [],
    compactions: [],
    compaction: null,
    step: null,
    provider: null,
    model: null,
    warnings: NO_WARNINGS,
  }
}

export function warn(next: Draft, warning: FoldWarning, n = 1): void {
  if (n > 0) next.warnings = { ...next.warnings, [warning]: next.warnings[warning] + n }
}

export function counted(next: Draft, counts: ReadCounts): void {
  warn(next, 'invalid-block', counts.invalid)
  warn(next, 'unknown-block', counts.unknown)
}

export function newCounts(): ReadCounts {
  return { invalid: 0, unknown: 0 }
}

/** Commits the streamed step (reasoning, text, calls) as an assistant message. */
export function commitOpen(next: Draft): void {
  const open = next.open
  if (open === null) return
  next.open = null
  const blocks: ContextBlock[] = []
  if (open.reasoning.length > 0) blocks.push({ type: 'reasoning', text: open.reasoning })
  if (open.text.length > 0) blocks.push({ type: 'text', text: open.text })
  // One push per call: spreading a step of many calls into `push` overflows the stack.
  for (const call of open.calls) blocks.push(call)
  if (blocks.length > 0) pushStep(next, { role: 'assistant', blocks, seq: open.seq, ...attribution(next) }, open.from ?? open.seq)
}

/**
 * Where the model step holding an event at `seq` began: the `step/start`
 * of the step still open before it, else `seq` itself (no step open: the
 * event begins its own).
 */
export function stepFrom(state: SessionContextState, seq: number): number {
  const step = state.step
  return step !== null && !step.ended && step.seq < seq ? step.seq : seq
}

/** An empty open step whose first event is at `seq`, remembering the `step/start` before it (see {@link stepFrom}). */
export function newOpen(state: SessionContextState, seq: number): OpenAssistant {
  const from = stepFrom(state, seq)
  return from === seq ? { seq, text: '', reasoning: '', calls: [] } : { seq, from, text: '', reasoning: '', calls: [] }
}

/** The block a `subagent/notice` event becomes: the event's data, phrased by whoever renders it (renderers skip it). */
export const NOTICE_BLOCK = 'notice'

/** Whether `message` is a notice that landed after `seq`. */
export function isNoticeAfter(message: ContextMessage | undefined, seq: number): message is ContextMessage {
  return message !== undefined && message.seq > seq && message.role === 'user' && message.blocks[0]?.type === NOTICE_BLOCK
}

/**
 * Pushes a step's message before the notices that landed during the step
 * (`from`: the step's first event, its `step/start` when the log has one):
 * a notice is read at the next step boundary, so a step's text and its
 * calls stay together, and a notice that lands between `step/start` and
 * the first streamed chunk is not read before the answer the model was
 * already writing.
 */
export function pushStep(next: Draft, message: ContextMessage, from: number): void {
  const held: ContextMessage[] = []
  for (let last = next.chunks.at(-1)?.at(-1); isNoticeAfter(last, from); last = next.chunks.at(-1)?.at(-1)) {
    held.unshift(last)
    next.chunks = popMessage(next.chunks)
  }
  push(next, message)
  for (const notice of held) push(next, notice)
}

export function attribution(state: SessionContextState): { provider?: string; model?: string } {
  return { ...(state.provider === null ? {} : { provider: state.provider }), ...(state.model === null ? {} : { model: state.model }) }
}

export function push(next: Draft, message: ContextMessage): void {
  next.chunks = pushMessage(next.chunks, message)
}
