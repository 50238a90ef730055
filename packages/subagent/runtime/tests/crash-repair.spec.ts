import { SessionSeq, type StoredSessionEvent } from '@dsh/session'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { interruptedTurnEnds } from '@dsh/session-persistence/backend'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, type SubagentTool } from '../src/index.js'
import { createHost, gate } from './helpers.js'

function log(...items: Array<[string, StoredSessionEvent['data']]>): StoredSessionEvent[] {
  return items.map(([type, data], seq) => ({ type, seq: SessionSeq(seq), time: seq, data }))
}

const interrupted = (turn: number, callId: string) => ({
  type: 'tool/result',
  data: {
    turn,
    callId,
    content: { code: 'TOOL_INTERRUPTED', message: expect.stringContaining('Check them before calling the tool again') },
    isError: true,
  },
})

describe('crash repair (session-persistence repair.ts)', () => {
  it('closes each dangling tool call of an open turn with a synthetic error result, then the turn', () => {
    const events = log(
      ['turn/start', { turn: 1 }],
      ['tool/call', { turn: 1, callId: 'a', name: 'x', arguments: {} }],
      ['tool/result', { turn: 1, callId: 'a', content: 'ok' }],
      ['turn/end', { turn: 1, reason: 'completed' }],
      ['turn/start', { turn: 2 }],
      ['tool/call', { turn: 2, callId: 'b', name: 'x', arguments: {} }],
      ['tool/call', { turn: 2, callId: 'c', name: 'y', arguments: {} }],
      ['tool/result', { turn: 2, callId: 'b', content: 'ok' }],
      ['tool/call', { turn: 2, callId: 'd', name: 'z', arguments: {} }],
    )
    const repairs = interruptedTurnEnds(events, 50)
    expect(repairs).toMatchObject([
      { seq: 9, time: 50, ...interrupted(2, 'c') },
      { seq: 10, time: 50, ...interrupted(2, 'd') },
      { type: 'turn/end', seq: 11, time: 50, data: { turn: 2, reason: 'interrupted' } },
    ])
    expect(repairs.every((e) => Object.isFrozen(e) && Object.isFrozen(e.data))).toBe(true)
    // A closed turn is left alone, even with a call that never got a result.
    expect(
      interruptedTurnEnds(
        log(
          ['turn/start', { turn: 1 }],
          ['tool/call', { turn: 1, callId: 'a', name: 'x', arguments: {} }],
          ['turn/end', { turn: 1, reason: 'error' }],
        ),
        1,
      ),
    ).toEqual([])
  })

  it('load() commits it: a parent stopped mid tool call (here: waiting on a child) resumes with no dangling call', async () => {
    const storage = new MemoryPersistenceStorage()
    const hold = gate()
    const entered = gate()
    const blocking: SubagentTool = {
      name: 'block',
      description: '',
      jsonSchema: {},
      execute: () => {
        entered.open()
        return hold.promise
      },
    }
    const first = await createHost({ storage, driver: createScriptedDriver([{ kind: 'call', name: 'block' }]), tools: () => [blocking] })
    const parent = first.sessions.create({ id: 'p' })
    first.runtime.drive(parent, { prompt: 'go' })
    await entered.promise
    await first.sessions.flush(parent)
    const before = (await first.persistence!.inspect('p' as never)).events
    expect(before.at(-1)).toMatchObject({ type: 'tool/call', data: { name: 'block' } })
    // The process "dies" here: nothing else reaches the storage. A new process loads the log.
    const second = await createHost({ storage })
    const loaded = await second.persistence!.load('p' as never)
    expect(loaded.events.slice(before.length)).toMatchObject([
      interrupted(1, 'call-1-1'),
      { type: 'turn/end', data: { turn: 1, reason: 'interrupted' } },
    ])
    const again = await second.persistence!.load('p' as never)
    expect(again.events).toHaveLength(loaded.events.length)
    await second.dispose()
    // The first host is abandoned, as a killed process would be: its held tool call never returns.
  })
})
