import { Context } from '@dsh/context'
import { type Session, type SessionStore, sessionStorePlugin } from '@dsh/session'
import { sessionContextPlugin } from '@dsh/session-context'
import type { SessionPersistence } from '@dsh/session-persistence'
import { sessionPersistencePlugin } from '@dsh/session-persistence/plugin'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { blockText, type CompactionService, type CompactionServiceOptions, compactionPlugin, type Summarizer } from '../src/index.js'

/**
 * An extractive summarizer: the first sentence of every shadowed message's
 * text, in order. Deterministic, so tests can assert on the summary; the
 * model-backed one lives in a driver package.
 */
export const extractive: Summarizer = {
  async summarize({ context }) {
    const lines = context.messages.map((m) => `${m.role}: ${m.blocks.map(blockText).join(' ').split('.')[0]!.slice(0, 60)}`)
    return { summary: `Summary of ${context.messages.length} messages.\n${lines.join('\n')}`, provider: 'test', model: 'extractive' }
  },
}

export interface Host {
  readonly ctx: Context
  readonly sessions: SessionStore
  readonly compaction: CompactionService
  readonly persistence: SessionPersistence
}

export async function host(
  persistence: SessionPersistence,
  summarizer: Summarizer | null = extractive,
  options: CompactionServiceOptions = {},
): Promise<Host> {
  const ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionPersistencePlugin(persistence))
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  if (summarizer !== null) ctx.provide('summarizer', summarizer)
  await ctx.activate(compactionPlugin(options))
  return { ctx, sessions: ctx.require('sessions'), compaction: ctx.require('compaction'), persistence: ctx.require('sessionPersistence') }
}

/** `turns` completed turns: a question, a tool call with a `resultChars`-long result, an answer. */
export function converse(session: Session, turns: number, resultChars = 100, from = 1): void {
  for (let t = from; t < from + turns; t++) {
    session.append('turn/start', { turn: t })
    session.append('user/message', { text: `Question ${t}. Please look at file ${t}.` })
    session.append('step/start', { provider: 'p', model: 'm' })
    session.append('assistant/message', {
      turn: t,
      text: '',
      blocks: [{ type: 'tool-call', id: `c${t}`, name: 'read', input: { path: `f${t}.txt` } }],
    })
    session.append('tool/result', { turn: t, callId: `c${t}`, content: `${t}`.repeat(resultChars) })
    session.append('step/end', { usage: { input: 10, output: 5 }, finish: 'tool-calls' })
    session.append('assistant/message', { turn: t, text: `Answer ${t}. The file holds ${resultChars} characters.` })
    session.append('turn/end', { turn: t, reason: 'completed' })
  }
}
