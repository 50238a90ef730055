import type { ContextMessage } from '@dsh/session-context'

/** The messages a compaction shadows and the event range `[from, to)` that selects them. */
export interface ShadowedRange {
  readonly messages: readonly ContextMessage[]
  readonly from: number
  readonly to: number
}

/**
 * All but the newest `keep` messages, the cut moved back past tool messages
 * so that no kept result loses its call. `to` is the first kept message's
 * seq (everything before it is shadowed), or `end` when nothing is kept.
 * Undefined when the range would hold nothing but an earlier summary.
 */
export function shadowedRange(messages: readonly ContextMessage[], keep: number, end: number): ShadowedRange | undefined {
  let cut = Math.max(0, messages.length - keep)
  while (cut > 0 && cut < messages.length && messages[cut]!.role === 'tool') cut--
  const shadowed = messages.slice(0, cut)
  if (!shadowed.some((m) => m.summary === undefined)) return undefined
  // A loop, not `Math.min(...)`: spreading a long context overflows the stack.
  let from = Number.POSITIVE_INFINITY
  for (const m of shadowed) from = Math.min(from, m.summary?.from ?? m.seq)
  const to = cut < messages.length ? messages[cut]!.seq : end
  return { messages: shadowed, from, to }
}
