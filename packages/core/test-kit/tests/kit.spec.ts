import { existsSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { SessionError, sameLifecycle } from '@dsh/session'
import { describe, expect, it, onTestFinished } from 'vitest'
import { HEADER_CREATED_AT, headerOf, prng, realisticTurns, tempDir, textSource } from '../src/index.js'

describe('tempDir', () => {
  it('makes a fresh empty directory under the OS temp directory, and cleanup removes it with its contents', () => {
    const a = tempDir('dsh-kit-')
    const b = tempDir('dsh-kit-')
    onTestFinished(a.cleanup)
    onTestFinished(b.cleanup)
    expect(a.dir).not.toBe(b.dir)
    expect(dirname(a.dir)).toBe(tmpdir())
    expect(basename(a.dir).startsWith('dsh-kit-')).toBe(true)
    expect(readdirSync(a.dir)).toEqual([])
    writeFileSync(join(a.dir, 'file'), 'x')
    a.cleanup()
    expect(existsSync(a.dir)).toBe(false)
    a.cleanup()
    expect(statSync(b.dir).isDirectory()).toBe(true)
  })

  it('puts a memory directory on /dev/shm where the machine has one, under the OS temp directory otherwise', () => {
    const { dir, cleanup } = tempDir('dsh-kit-memory-', { memory: true })
    onTestFinished(cleanup)
    expect(dirname(dir)).toBe(existsSync('/dev/shm') ? '/dev/shm' : tmpdir())
  })

  it('uses a dsh prefix when none is given', () => {
    const { dir, cleanup } = tempDir()
    onTestFinished(cleanup)
    expect(basename(dir).startsWith('dsh-test-')).toBe(true)
  })
})

describe('headerOf', () => {
  it('is a frozen top-level header with the defaults', () => {
    const header = headerOf('a')
    expect(header).toEqual({ version: 1, id: 'a', createdAt: HEADER_CREATED_AT, isSeeded: false, delegationDepth: 0 })
    expect(Object.isFrozen(header)).toBe(true)
  })

  it('lays extra fields over the defaults and treats undefined as absent', () => {
    const child = headerOf('c', { parentSession: 'p', origin: 'subagent', isSeeded: true, delegationDepth: 1, cwd: undefined })
    expect(child).toEqual({
      version: 1,
      id: 'c',
      createdAt: HEADER_CREATED_AT,
      parentSession: 'p',
      origin: 'subagent',
      isSeeded: true,
      delegationDepth: 1,
    })
    expect('cwd' in child).toBe(false)
    expect(sameLifecycle(headerOf('c', { createdAt: 5 }), headerOf('c', { createdAt: 5 }))).toBe(true)
  })

  it('refuses a combination the session model rejects, with its code', () => {
    let error: unknown
    try {
      headerOf('orphan', { origin: 'subagent' })
    } catch (e) {
      error = e
    }
    expect(error).toBeInstanceOf(SessionError)
    expect((error as SessionError).code).toBe('SESSION_INVALID_HEADER')
  })
})

describe('prng', () => {
  it('repeats its sequence for a seed, differs between seeds, and stays in [0, 1)', () => {
    const draw = (seed: number) => Array.from({ length: 1000 }, prng(seed))
    const one = draw(1)
    expect(draw(1)).toEqual(one)
    expect(draw(2)).not.toEqual(one)
    for (const value of one) expect(value >= 0 && value < 1).toBe(true)
    // Spread over the interval: every tenth of [0, 1) is hit in 1000 draws.
    expect(new Set(one.map((v) => Math.floor(v * 10))).size).toBe(10)
  })
})

describe('textSource', () => {
  it('draws the same words and lines from the same seed', () => {
    const sample = (seed: number) => {
      const text = textSource(prng(seed))
      return [text.words(20), text.codeLine(), text.word()]
    }
    expect(sample(3)).toEqual(sample(3))
    expect(sample(3)).not.toEqual(sample(4))
    expect(sample(3)[0]!.split(' ')).toHaveLength(20)
  })
})

describe('realisticTurns', () => {
  const BYTES = 256 * 1024

  it('is the same transcript for the same seed, and another for another seed', () => {
    expect(realisticTurns(BYTES, 7)).toEqual(realisticTurns(BYTES, 7))
    expect(realisticTurns(BYTES, 8)).not.toEqual(realisticTurns(BYTES, 7))
  })

  it('stops at the first turn whose lines reach the byte bound, with contiguous seqs and whole turns', () => {
    const turns = realisticTurns(BYTES)
    const lineBytes = (events: readonly unknown[]) => events.reduce<number>((sum, e) => sum + JSON.stringify(e).length + 1, 0)
    const all = turns.flat()
    expect(lineBytes(all)).toBeGreaterThanOrEqual(BYTES)
    expect(lineBytes(turns.slice(0, -1).flat())).toBeLessThan(BYTES)
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i))
    for (const [i, events] of turns.entries()) {
      expect(events[0]).toMatchObject({ type: 'turn/start', data: { turn: i + 1 } })
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: i + 1, reason: 'completed' } })
      const types = new Set(events.map((e) => e.type))
      for (const type of ['user/message', 'assistant/chunk', 'tool/call', 'tool/result', 'assistant/message']) expect(types).toContain(type)
    }
    expect(all.every((e) => Object.isFrozen(e) && Object.isFrozen(e.data))).toBe(true)
    for (let i = 1; i < all.length; i++) expect(all[i]!.time).toBeGreaterThan(all[i - 1]!.time)
  })

  it('joins each turn’s chunk deltas into its assistant message', () => {
    for (const events of realisticTurns(64 * 1024)) {
      const deltas = events.filter((e) => e.type === 'assistant/chunk').map((e) => (e.data as { delta: string }).delta)
      const message = events.find((e) => e.type === 'assistant/message')!
      expect((message.data as { text: string }).text).toBe(deltas.join(''))
    }
  })
})
