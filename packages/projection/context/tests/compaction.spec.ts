import { describe, expect, it } from 'vitest'
import { PRUNED_RESULT_TEXT } from '../src/index.js'
import { liveHost, play, transcript } from './helpers.js'
import { compaction, OLD_TURN, OLD_TURN_TRANSCRIPT } from './scripts.js'

describe('sessionContext: compaction never rewrites the log, the fold applies it', () => {
  it('a summary followed by an end without error replaces the shadowed range [from, to) with the summary', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [...OLD_TURN, ...compaction('k1', 0, 12, 'S1'), { type: 'user/message', data: { text: 'after' } }])
    const context = contextOf(session)
    expect(transcript(context)).toEqual(['user: S1', 'user: after'])
    const mark = { seq: 13, compactionId: 'k1', from: 0, to: 12, provider: 'p', model: 'sum' }
    expect(context.messages[0]).toEqual({ role: 'user', blocks: [{ type: 'text', text: 'S1' }], seq: 0, summary: mark })
    expect(context).toMatchObject({ compaction: mark, compacting: false })
    // The log still holds every event.
    expect(session.events.length).toBe(16)
  })

  it('a range that cuts between calls and their results leaves the results out (counted), never a result without its call', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [...OLD_TURN, ...compaction('k', 0, 7, 'S')])
    const context = contextOf(session)
    expect(transcript(context)).toEqual(['user: S', 'assistant: Done.'])
    expect(context.warnings['orphan-result']).toBe(2)
  })

  it('an unfinished compaction is ignored: an end with error, a start without an end, a summary or end without a start', () => {
    const { sessions, contextOf } = liveHost()
    const interrupted = sessions.create()
    play(interrupted, [
      ...OLD_TURN,
      { type: 'compaction/start', data: { compactionId: 'k', turn: null } },
      { type: 'compaction/summary', data: { compactionId: 'k', summary: [{ type: 'text', text: 'S' }], from: 0, to: 12 } },
      { type: 'compaction/end', data: { compactionId: 'k', turn: null, error: 'interrupted' } },
    ])
    expect(transcript(contextOf(interrupted))).toEqual(OLD_TURN_TRANSCRIPT)
    expect(contextOf(interrupted)).toMatchObject({ compaction: null, compacting: false })
    expect(contextOf(interrupted).warnings['abandoned-compaction']).toBe(1)

    const open = sessions.create()
    play(open, [...OLD_TURN, ...compaction('k', 0, 12, 'S').slice(0, 2)])
    expect(transcript(contextOf(open))).toEqual(OLD_TURN_TRANSCRIPT)
    expect(contextOf(open).compacting).toBe(true)

    const stray = sessions.create()
    play(stray, [...OLD_TURN, ...compaction('k', 0, 12, 'S').slice(1)])
    expect(transcript(contextOf(stray))).toEqual(OLD_TURN_TRANSCRIPT)
    expect(contextOf(stray).warnings['unmatched-compaction']).toBe(2)

    const noSummary = sessions.create()
    play(noSummary, [...OLD_TURN, ...compaction('k', 0, 12, 'S').filter((e) => e.type !== 'compaction/summary')])
    expect(transcript(contextOf(noSummary))).toEqual(OLD_TURN_TRANSCRIPT)
    expect(contextOf(noSummary).warnings['abandoned-compaction']).toBe(1)
  })

  it('events that name no compaction belong to the newest open one; a later compaction may shadow an earlier summary', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [
      ...OLD_TURN,
      { type: 'compaction/start', data: { reason: 'size' } },
      { type: 'compaction/summary', data: { summary: [{ type: 'text', text: 'S1' }], from: 0, to: 9 } },
      { type: 'compaction/end', data: {} },
      { type: 'user/message', data: { text: 'more' } },
      ...compaction('k2', 0, 16, 'S2'),
      { type: 'user/message', data: { text: 'last' } },
    ])
    expect(transcript(contextOf(session))).toEqual(['user: S2', 'user: last'])
  })

  it('a harness compaction names the shadowed message events in shadowedSeqs', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [
      ...OLD_TURN,
      { type: 'compaction/start', data: { compactionId: 'h', turn: null } },
      {
        type: 'compaction/summary',
        data: {
          compactionId: 'h',
          summary: [{ type: 'text', text: 'H' }],
          shadowedRange: { start: 0, end: 8 },
          shadowedSeqs: [0, 2, 7, 8],
          shadowedTokenCount: 40,
          provider: 'p',
          model: 'm',
        },
      },
      { type: 'compaction/end', data: { compactionId: 'h', turn: null } },
    ])
    const context = contextOf(session)
    expect(transcript(context)).toEqual(['user: H', 'assistant: Done.'])
    expect(context.compaction).toMatchObject({ from: 0, to: 9, compactionId: 'h' })
  })
})

describe('sessionContext: compaction/prune', () => {
  it('replaces the named results’ content with a placeholder and keeps calls and results paired; names it cannot find are counted', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [...OLD_TURN, { type: 'compaction/prune', data: { callIds: ['c1', 'nope'] } }])
    const context = contextOf(session)
    expect(transcript(context)).toEqual([
      'user: hi',
      'assistant: (think) | Let me look. | call c1 read {"path":"a"} | call c2 grep "not json"',
      `tool: result c1: ${PRUNED_RESULT_TEXT}`,
      'tool: result c2 error: Error E: bad',
      'assistant: Done.',
    ])
    expect(context.warnings['unmatched-prune']).toBe(1)
  })

  it('takes a placeholder, or the harness’s shadowedSeqs', () => {
    const { sessions, contextOf } = liveHost()
    const session = sessions.create()
    play(session, [
      ...OLD_TURN,
      { type: 'compaction/prune', data: { callIds: ['c2'], placeholder: '[gone]' } },
      { type: 'compaction/prune', data: { shadowedRange: { start: 7, end: 7 }, shadowedSeqs: [7], shadowedTokenCount: 3 } },
    ])
    expect(transcript(contextOf(session)).slice(2, 4)).toEqual([`tool: result c1: ${PRUNED_RESULT_TEXT}`, 'tool: result c2 error: [gone]'])
  })
})

describe('sessionContext: forks', () => {
  it('a fork after a compaction inherits the compacted context; a fork cut inside a compaction does not apply it', () => {
    const { sessions, contextOf } = liveHost()
    const parent = sessions.create()
    play(parent, [...OLD_TURN, ...compaction('k1', 0, 12, 'S1')])
    const child = sessions.fork(parent)
    child.append('user/message', { text: 'child' })
    expect(child.inheritedEventCount).toBe(15)
    expect(transcript(contextOf(child))).toEqual(['user: S1', 'user: child'])
    expect(contextOf(child).compaction?.compactionId).toBe('k1')

    const inside = sessions.create({ seed: parent.events.slice(0, 14), inheritedEventCount: 14 })
    inside.append('user/message', { text: 'cut' })
    expect(transcript(contextOf(inside))).toEqual([...OLD_TURN_TRANSCRIPT, 'user: cut'])
    expect(contextOf(inside).compacting).toBe(true)
  })
})
