import type { Session } from '@dsh/session'
import { type ContextMessage, PRUNED_RESULT_TEXT } from '@dsh/session-context'
import { createMemoryPersistence } from '@dsh/session-persistence'
import { describe, expect, it, onTestFinished } from 'vitest'
import { blockText, type Summarizer } from '../src/index.js'
import { host } from './support.js'

/**
 * Spans of many tool calls. The summarizer is the probe: it records the
 * messages each compaction hands it, and the tests assert them exactly (every
 * call followed by its own result, in call order, the cut moved back to a
 * call). The service's own passes over the messages (the cut, the estimate,
 * the prunable results) have no work counter; these sizes pin their output
 * where a pass per call would run to hundreds of millions of steps.
 */
const CALLS = 20_000

function recording(): { summarizer: Summarizer; seen: ContextMessage[][] } {
  const seen: ContextMessage[][] = []
  const summarizer: Summarizer = {
    async summarize({ context }) {
      seen.push([...context.messages])
      return { summary: `Summary of ${context.messages.length} messages.` }
    },
  }
  return { summarizer, seen }
}

const callIds = (message: ContextMessage): string[] =>
  message.blocks.flatMap((b) => (b.type === 'tool-call' ? [(b as { id: string }).id] : []))
const resultId = (message: ContextMessage): string | undefined => (message.blocks[0] as { callId?: string } | undefined)?.callId
const ids = (from: number, to: number): string[] => Array.from({ length: to - from }, (_, i) => `c${from + i}`)
const seqOf = (session: Session, type: string, text: string): number =>
  session.events.find((e) => e.type === type && (e.data as { text?: unknown }).text === text)!.seq

/** The first prompt: longer than the recording summarizer's answer, so a compaction of it alone shrinks the context. */
const PROMPT = 'Read every file in the project and tell me which of them hold configuration.'

describe('compaction over many tool calls', () => {
  it(`one step of ${CALLS.toLocaleString('en')} calls: the cut walks back over its results, then a compaction summarizes them all`, async () => {
    const { summarizer, seen } = recording()
    const h = await host(createMemoryPersistence(), summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    session.append('turn/start', { turn: 1 })
    session.append('user/message', { text: PROMPT })
    session.append('step/start', { provider: 'p', model: 'm' })
    session.append('assistant/message', {
      turn: 1,
      text: '',
      blocks: ids(0, CALLS).map((id, i) => ({ type: 'tool-call', id, name: 'read', input: { path: `f${i}.txt` } })),
    })
    for (const id of ids(0, CALLS)) session.append('tool/result', { turn: 1, callId: id, content: `content of ${id}` })
    session.append('step/end', { finish: 'tool-calls' })
    session.append('assistant/message', { turn: 1, text: 'Read them all.' })
    session.append('turn/end', { turn: 1, reason: 'completed' })
    session.append('turn/start', { turn: 2 })
    session.append('user/message', { text: 'Next.' })
    session.append('assistant/message', { turn: 2, text: 'Done.' })
    session.append('turn/end', { turn: 2, reason: 'completed' })

    // Keeping 4 cuts into the results; the cut moves back to the message holding the calls.
    const first = await h.compaction.compact(session, { reason: 'manual', keep: 4 })
    expect(first.shadowed).toBe(1)
    expect(first.from).toBe(seqOf(session, 'user/message', PROMPT))
    expect(first.to).toBe(seqOf(session, 'user/message', PROMPT) + 2)
    expect(seen[0]!.map((m) => m.role)).toEqual(['user'])

    const second = await h.compaction.compact(session, { reason: 'manual', keep: 2 })
    const shown = seen[1]!
    expect(second.shadowed).toBe(CALLS + 3)
    expect(shown).toHaveLength(CALLS + 3)
    expect(shown[0]!.summary?.compactionId).toBe(first.compactionId)
    expect(callIds(shown[1]!)).toEqual(ids(0, CALLS))
    expect(shown.slice(2, CALLS + 2).map(resultId)).toEqual(ids(0, CALLS))
    expect(shown.at(-1)!.blocks).toEqual([{ type: 'text', text: 'Read them all.' }])
    expect(second.from).toBe(first.from)
    expect(second.to).toBe(seqOf(session, 'user/message', 'Next.'))

    const after = await h.ctx.require('sessionContext').contextOf(session)
    expect(after.messages.map((m) => m.role)).toEqual(['user', 'user', 'assistant'])
    expect(after.messages[0]!.summary?.compactionId).toBe(second.compactionId)
  })

  it(`${CALLS.toLocaleString('en')} steps of one call each: a prune names every old result, a compaction summarizes each call with its result`, async () => {
    const { summarizer, seen } = recording()
    const h = await host(createMemoryPersistence(), summarizer)
    onTestFinished(() => h.ctx.dispose())
    const session = h.sessions.create()
    session.append('turn/start', { turn: 1 })
    session.append('user/message', { text: 'Read the files one by one.' })
    for (const [i, id] of ids(0, CALLS).entries()) {
      session.append('step/start', { provider: 'p', model: 'm' })
      session.append('assistant/message', {
        turn: 1,
        text: '',
        blocks: [{ type: 'tool-call', id, name: 'read', input: { path: `f${i}.txt` } }],
      })
      session.append('tool/result', { turn: 1, callId: id, content: `content of ${id}` })
      session.append('step/end', { finish: 'tool-calls' })
    }
    session.append('assistant/message', { turn: 1, text: 'Read them all.' })
    session.append('turn/end', { turn: 1, reason: 'completed' })

    const pruned = await h.compaction.prune(session, { minChars: 1, keepNewest: 4 })
    expect(pruned.callIds).toEqual(ids(0, CALLS - 4))
    expect(pruned.chars).toBe(ids(0, CALLS - 4).reduce((n, id) => n + `content of ${id}`.length, 0))

    // Keeping 2 cuts at the last result; the cut moves back to its call.
    const result = await h.compaction.compact(session, { reason: 'manual', keep: 2 })
    const shown = seen[0]!
    expect(result.shadowed).toBe(2 * CALLS - 1)
    expect(shown).toHaveLength(2 * CALLS - 1)
    expect(shown[0]!.blocks).toEqual([{ type: 'text', text: 'Read the files one by one.' }])
    const steps = shown.slice(1)
    expect(steps.filter((_, i) => i % 2 === 0).map(callIds)).toEqual(ids(0, CALLS - 1).map((id) => [id]))
    expect(steps.filter((_, i) => i % 2 === 1).map(resultId)).toEqual(ids(0, CALLS - 1))
    const texts = steps.filter((_, i) => i % 2 === 1).map((m) => blockText(m.blocks[0]!))
    expect(texts.slice(0, CALLS - 4).every((text) => text === PRUNED_RESULT_TEXT)).toBe(true)
    expect(texts.slice(CALLS - 4)).toEqual(ids(CALLS - 4, CALLS - 1).map((id) => `content of ${id}`))

    const after = await h.ctx.require('sessionContext').contextOf(session)
    expect(after.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant'])
    expect(callIds(after.messages[1]!)).toEqual([`c${CALLS - 1}`])
    expect(resultId(after.messages[2]!)).toBe(`c${CALLS - 1}`)
  })
})
