import type { StoredSessionEvent } from '@dsh/session'
import { z } from 'zod'
import type { SessionProjectionUnit } from '../src/index.js'

declare module '../src/types.js' {
  interface SessionProjectionStateMap {
    count: { n: number }
    lastText: { text: string | null }
    fragile: { n: number }
    picky: { n: number }
  }
  interface SessionProjectionMap {
    count: number
    lastText: string | null
    fragile: number
    picky: number
  }
}

/** Counts every event: changes on every event. */
export const countUnit: SessionProjectionUnit<'count'> = {
  key: 'count',
  stateVersion: 1,
  init: () => ({ n: 0 }),
  apply: (state) => ({ n: state.n + 1 }),
  view: (state) => state.n,
  schema: z.object({ n: z.number().int().nonnegative() }),
}

/** The last user message: unchanged (same reference) by every other event. */
export const lastTextUnit: SessionProjectionUnit<'lastText'> = {
  key: 'lastText',
  stateVersion: 3,
  init: () => ({ text: null }),
  apply: (state, event) => (event.type === 'user/message' ? { text: (event.data as { text: string }).text } : state),
  view: (state) => state.text,
  schema: z.object({ text: z.string().nullable() }),
}

/** Throws on `tool/call`; counts everything else. */
export const fragileUnit: SessionProjectionUnit<'fragile'> = {
  key: 'fragile',
  stateVersion: 1,
  init: () => ({ n: 0 }),
  apply: (state, event) => {
    if (event.type === 'tool/call') throw new Error('fragile: cannot fold tool/call')
    return { n: state.n + 1 }
  },
  view: (state) => state.n,
  schema: z.object({ n: z.number() }),
}

/** Folds fine, but `view` throws while the count is odd. */
export const pickyUnit: SessionProjectionUnit<'picky'> = {
  key: 'picky',
  stateVersion: 1,
  init: () => ({ n: 0 }),
  apply: (state) => ({ n: state.n + 1 }),
  view: (state) => {
    if (state.n % 2 === 1) throw new Error('picky: odd counts have no view')
    return state.n
  },
  schema: z.object({ n: z.number() }),
}

/** The reference values of the test units, by a plain loop over the whole log. */
export function expected(
  events: readonly StoredSessionEvent[],
  keys: readonly string[] = ['count', 'lastText', 'fragile'],
): Record<string, unknown> {
  let text: string | null = null
  let fragile: number | undefined = 0
  for (const event of events) {
    if (event.type === 'user/message') text = (event.data as { text: string }).text
    if (fragile !== undefined) fragile = event.type === 'tool/call' ? undefined : fragile + 1
  }
  const all: Record<string, unknown> = { count: events.length, lastText: text, ...(fragile === undefined ? {} : { fragile }) }
  return Object.fromEntries(Object.entries(all).filter(([key]) => keys.includes(key)))
}
