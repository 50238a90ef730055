import { describe, expect, it } from 'vitest'
import { hostsPerTest } from './helpers.js'

const hosts = hostsPerTest()

describe('subagent/run-start', () => {
  it('is announced before each run of a child, and what a listener appends lands between the descriptor and subagent/start', async () => {
    const h = await hosts.open()
    const heard: [string, string, number][] = []
    h.ctx.on('subagent/run-start', (child, run) => {
      heard.push([child.id, run.kind, run.turn])
      child.append('example/annotation', { kind: run.kind })
    })
    const parent = h.sessions.create({ id: 'parent' })
    const handle = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', prompt: 'look', id: 'kid' })
    await handle.done
    expect(heard).toEqual([['kid', 'spawn', 1]])
    const log = await h.persistence!.load(handle.id)
    expect(log.events.slice(0, 4).map((event) => event.type)).toEqual([
      'subagent/descriptor',
      'example/annotation',
      'subagent/start',
      'user/message',
    ])
  })

  it('a throwing listener is reported to the logger and the run still starts', async () => {
    const h = await hosts.open()
    h.ctx.on('subagent/run-start', () => {
      throw new Error('listener failed')
    })
    const parent = h.sessions.create({ id: 'parent' })
    const settled = await h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: 'go' }).done
    expect(settled.end).toBe('completed')
    expect(h.errors.map((error) => (error as Error).message)).toEqual(['listener failed'])
  })
})
