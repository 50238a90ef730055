import type { StoredSessionEvent } from '@dsh/session'
import { counted, type Draft, MAX_OPEN_COMPACTIONS, newCounts, PRUNED_RESULT_TEXT, warn } from './draft.js'
import { flatten, mapMessages, toChunks } from './messages.js'
import { isObject, type Json, readBlocks } from './read.js'
import type { ContextBlock, ContextMessage, ContextSummaryMark, OpenCompaction } from './types.js'

/**
 * Compaction never rewrites the log: the fold applies it. A compaction is
 * `compaction/start`, `compaction/summary`, `compaction/end`; only an end
 * without `error` after a summary replaces the shadowed messages with one
 * `user` message holding the summary. Events name their compaction by
 * `compactionId`; an event without one belongs to the newest open
 * compaction.
 */

/** The owner of a compaction event: its id, null when it names none, undefined when `compactionId` is not a string. */
function ownerOf(data: Json): string | null | undefined {
  if (!Object.hasOwn(data, 'compactionId')) return null
  return typeof data.compactionId === 'string' ? data.compactionId : undefined
}

function openIndex(compactions: readonly OpenCompaction[], id: string | null): number {
  if (id === null) return compactions.length - 1
  for (let i = compactions.length - 1; i >= 0; i--) if (compactions[i]?.compactionId === id) return i
  return -1
}

function isSeq(value: unknown, below: number): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= below
}

export function compactionStart(next: Draft, event: StoredSessionEvent, data: Json): void {
  const id = ownerOf(data)
  if (id === undefined) {
    warn(next, 'invalid-event')
    return
  }
  // A compaction that begins while one of the same owner is open abandons it (the first never finished).
  const kept = next.compactions.filter((open) => open.compactionId !== id)
  warn(next, 'abandoned-compaction', next.compactions.length - kept.length)
  kept.push({ seq: event.seq, compactionId: id, summary: null })
  const dropped = Math.max(0, kept.length - MAX_OPEN_COMPACTIONS)
  warn(next, 'abandoned-compaction', dropped)
  next.compactions = kept.slice(dropped)
}

/** The shadowed range of a summary: dsh's `[from, to)`, or the span and set of a harness's `shadowedSeqs`. */
function shadowOf(data: Json, seq: number): { from: number; to: number; seqs?: number[] } | undefined {
  if (Object.hasOwn(data, 'from') || Object.hasOwn(data, 'to')) {
    const { from, to } = data
    return isSeq(from, seq) && isSeq(to, seq) && from <= to ? { from, to } : undefined
  }
  const listed = data.shadowedSeqs
  if (!Array.isArray(listed) || listed.length === 0 || !listed.every((s) => isSeq(s, seq - 1))) return undefined
  const seqs = [...new Set(listed as number[])].sort((a, b) => a - b)
  return { from: seqs[0] as number, to: (seqs.at(-1) as number) + 1, seqs }
}

export function compactionSummary(next: Draft, event: StoredSessionEvent, data: Json): void {
  const id = ownerOf(data)
  if (id === undefined) {
    warn(next, 'invalid-event')
    return
  }
  const at = openIndex(next.compactions, id)
  if (at < 0) {
    warn(next, 'unmatched-compaction')
    return
  }
  const counts = newCounts()
  const blocks = readBlocks(data.summary, counts)
  const shadow = shadowOf(data, event.seq)
  if (blocks === undefined || shadow === undefined) {
    warn(next, 'invalid-event')
    return
  }
  counted(next, counts)
  const open = next.compactions[at] as OpenCompaction
  const mark: ContextSummaryMark = {
    seq: event.seq,
    ...(open.compactionId === null ? {} : { compactionId: open.compactionId }),
    from: shadow.from,
    to: shadow.to,
    ...(typeof data.provider === 'string' ? { provider: data.provider } : {}),
    ...(typeof data.model === 'string' ? { model: data.model } : {}),
  }
  const summary = shadow.seqs === undefined ? { mark, blocks } : { mark, blocks, seqs: shadow.seqs }
  next.compactions = next.compactions.map((c, i) => (i === at ? { ...c, summary } : c))
}

export function compactionEnd(next: Draft, _event: StoredSessionEvent, data: Json): void {
  const id = ownerOf(data)
  if (id === undefined) {
    warn(next, 'invalid-event')
    return
  }
  const at = openIndex(next.compactions, id)
  if (at < 0) {
    warn(next, 'unmatched-compaction')
    return
  }
  const open = next.compactions[at] as OpenCompaction
  next.compactions = next.compactions.filter((_, i) => i !== at)
  const failed = Object.hasOwn(data, 'error') && data.error !== null && data.error !== false
  if (failed || open.summary === null) {
    warn(next, 'abandoned-compaction')
    return
  }
  applyCompaction(next, open.summary.mark, open.summary.blocks, open.summary.seqs)
}

/** Replaces the shadowed messages with the summary, placed where the first of them was. */
export function applyCompaction(next: Draft, mark: ContextSummaryMark, blocks: readonly ContextBlock[], seqs?: readonly number[]): void {
  const listed = seqs === undefined ? undefined : new Set(seqs)
  const shadowed = (m: ContextMessage): boolean => (listed === undefined ? m.seq >= mark.from && m.seq < mark.to : listed.has(m.seq))
  const summary: ContextMessage = { role: 'user', blocks, seq: mark.from, summary: mark }
  const out: ContextMessage[] = []
  let placed = false
  for (const message of flatten(next.chunks)) {
    if (!placed && (shadowed(message) || message.seq >= mark.from)) {
      out.push(summary)
      placed = true
    }
    if (!shadowed(message)) out.push(message)
  }
  if (!placed) out.push(summary)
  next.chunks = toChunks(out)
  next.compaction = mark
}

/** `compaction/prune`: the named tool results keep their pairing; their content becomes a placeholder. */
export function prune(next: Draft, _event: StoredSessionEvent, data: Json): void {
  const placeholder = typeof data.placeholder === 'string' && data.placeholder.length > 0 ? data.placeholder : PRUNED_RESULT_TEXT
  const ids =
    Array.isArray(data.callIds) && data.callIds.every((id) => typeof id === 'string') ? new Set(data.callIds as string[]) : undefined
  const listed = data.shadowedSeqs
  const seqs =
    ids === undefined && Array.isArray(listed) && listed.every((s) => typeof s === 'number') ? new Set(listed as number[]) : undefined
  if (ids === undefined && seqs === undefined) {
    warn(next, 'invalid-event')
    return
  }
  const hit = new Set<string | number>()
  next.chunks = mapMessages(next.chunks, (message) => {
    if (message.role !== 'tool') return message
    const block = message.blocks[0]
    if (!isObject(block) || block.type !== 'tool-result' || typeof block.callId !== 'string') return message
    const key = ids === undefined ? message.seq : block.callId
    if (!(ids?.has(block.callId) ?? seqs?.has(message.seq))) return message
    hit.add(key)
    return {
      ...message,
      blocks: [{ ...block, content: [{ type: 'text', text: placeholder }] } as ContextBlock, ...message.blocks.slice(1)],
    }
  })
  warn(next, 'unmatched-prune', (ids ?? seqs ?? new Set()).size - hit.size)
}
