import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answer, callTools, type ModelServer, type RecordedRequest, startModelServer } from '@dsh/driver-openai/testing'
import { ATTACHMENT_INLINE_MAX_BYTES, SessionId } from '@dsh/session'
import { ATTACHMENT_MAX_BYTES } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { cleanEnv, dshRun } from './support/dsh-process.js'

// `dsh run --image` as a user runs it: the built CLI in its own process, a
// JSONL root, and the local model server (the only fake) recording what the
// requests carried.
const KEY = 'sk-e2e-image-5c1d'

let dir: string
let root: string
let server: ModelServer | undefined

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-run-image-'))
  root = join(dir, 'root')
})
afterEach(async () => {
  await server?.close()
  server = undefined
  rmSync(dir, { recursive: true, force: true })
})

const dsh = (args: string[]) => dshRun(args, cleanEnv({ DSH_API_KEY: KEY }))

/** Image-like bytes well over the inline threshold: a PNG signature, then bytes that differ along the file. */
function pngBytes(size: number): Buffer {
  const out = Buffer.alloc(size)
  Buffer.from('89504e470d0a1a0a', 'hex').copy(out)
  let x = 7
  for (let i = 8; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0
    out[i] = x >>> 24
  }
  return out
}

/** Every file under the root's `<session dir>/attachments/`, with its size. */
function attachmentFiles(): { place: string; bytes: number }[] {
  const out: { place: string; bytes: number }[] = []
  for (const session of readdirSync(root, { withFileTypes: true })) {
    if (!session.isDirectory()) continue
    const attachments = join(root, session.name, 'attachments')
    let names: string[] = []
    try {
      names = readdirSync(attachments)
    } catch {
      continue
    }
    for (const name of names) out.push({ place: join(session.name, 'attachments', name), bytes: statSync(join(attachments, name)).size })
  }
  return out
}

type Part = { type: string; text?: string; image_url?: { url: string } }
const userParts = (request: RecordedRequest): Part[] =>
  request.body.messages.flatMap((m) => (m.role === 'user' && Array.isArray(m.content) ? (m.content as Part[]) : []))
const lastUserText = (request: RecordedRequest): unknown => request.body.messages.filter((m) => m.role === 'user').at(-1)?.content
const startedIds = (request: RecordedRequest) =>
  request.body.messages.filter((m) => m.role === 'tool').flatMap((m) => /^Started (\S+)/.exec(String(m.content))?.slice(1) ?? [])

describe('dsh run --image', () => {
  it('the request carries the image as a data URL, the log holds only its reference, and a fork reads the same file without a copy; deleting the source is REFERENCED', async () => {
    const image = pngBytes(ATTACHMENT_INLINE_MAX_BYTES * 10 + 3)
    const base64 = image.toString('base64')
    const path = join(dir, 'chart.png')
    writeFileSync(path, image)
    server = await startModelServer((request) => {
      if (lastUserText(request) === 'describe the chart again') return answer(['Still a chart.'])
      const step = request.body.messages.filter((m) => m.role === 'tool').length
      if (step === 0)
        return callTools([
          { id: 'c1', name: 'subagent', arguments: '{"prompt":"describe the chart again","label":"fork-one","context":"fork"}' },
        ])
      if (step === 1) return callTools([{ id: 'c2', name: 'wait_agents', arguments: JSON.stringify({ ids: startedIds(request) }) }])
      return answer(['A rising chart.'])
    })
    const result = await dsh(['run', '--image', path, 'What does this chart show?', '--root', root, '--base-url', server.baseURL])
    expect(result.code, result.stdout + result.stderr).toBe(0)
    expect(result.stdout).toContain('A rising chart.')
    const id = /^session (\S+)$/m.exec(result.stdout)![1]!

    // Every request, the parent's and the fork's, carried the prompt and the image as a data URL.
    const dataUrl = `data:image/png;base64,${base64}`
    const forked = server.requests.filter((request) => lastUserText(request) === 'describe the chart again')
    expect(forked).toHaveLength(1)
    expect(server.requests.length).toBe(4)
    const carried = server.requests.map((request) =>
      userParts(request).map((part) => (part.type === 'image_url' ? part.image_url?.url === dataUrl : `${part.type}: ${part.text}`)),
    )
    expect(carried).toEqual(Array.from({ length: 4 }, () => ['text: What does this chart show?', true]))

    // The log holds the reference (digest, type, size, name); zstd -dc of the log shows none of the bytes.
    const backend = createJsonlPersistence({ root })
    const plain = execFileSync('zstd', ['-dc', backend.logPath(id)], { maxBuffer: 64 << 20 }).toString('latin1')
    expect(plain).toContain('What does this chart show?')
    expect(plain).toContain('"type":"image"')
    expect(plain).toContain('"name":"chart.png"')
    expect(plain).not.toContain(base64.slice(0, 64))
    expect(plain).not.toContain(image.subarray(8, 72).toString('latin1'))
    expect(plain.length).toBeLessThan(image.length)
    const message = (await backend.inspect(SessionId(id))).events.find((event) => event.type === 'user/message')!
    const ref = (message.data as { blocks: { type: string; attachment?: { digest: string; size: number; data?: string } }[] }).blocks[1]!
    expect(ref).toMatchObject({ type: 'image', attachment: { mediaType: 'image/png', size: image.length, name: 'chart.png' } })
    expect(ref.attachment?.data).toBeUndefined()

    // One stored file of the image's size in the whole root: the fork (a session of its own) reads it through the reference.
    const sessions = readdirSync(root, { withFileTypes: true }).filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
    const forks = (await backend.list()).filter((record) => record.header.id !== id)
    expect(forks.map((record) => [record.header.parentSession, record.inheritedEventCount > 0])).toEqual([[id, true]])
    const forkId = forks[0]!.header.id
    expect(sessions.length).toBeGreaterThanOrEqual(2)
    expect(attachmentFiles()).toEqual([{ place: expect.stringContaining(`attachments/${ref.attachment!.digest}`), bytes: image.length }])
    const forkLog = execFileSync('zstd', ['-dc', backend.logPath(forkId)], { maxBuffer: 64 << 20 }).toString('latin1')
    expect(forkLog).not.toContain(base64.slice(0, 64))
    expect(Buffer.from(await backend.readAttachment(SessionId(forkId), ref.attachment!.digest)).equals(image)).toBe(true)

    // Deleting the source while the fork reads its attachment is refused, as for any fork's source; nothing is removed.
    await expect(backend.delete(SessionId(id))).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_REFERENCED' })
    expect(attachmentFiles()).toHaveLength(1)
    expect(Buffer.from(await backend.readAttachment(SessionId(forkId), ref.attachment!.digest)).equals(image)).toBe(true)
    await backend.close()
  })

  it('a bad --image (missing file, unknown type, no prompt) is CLI_USAGE before the root is touched', async () => {
    const text = join(dir, 'notes.txt')
    writeFileSync(text, 'not an image')
    for (const args of [
      ['--image', join(dir, 'missing.png'), 'look'],
      ['--image', text, 'look'],
      ['--image', dir.concat('.png'), 'look'],
    ]) {
      const result = await dsh(['run', ...args, '--root', root, '--base-url', 'http://127.0.0.1:9/v1'])
      expect(result.code, result.stderr).toBe(2)
      expect(result.stderr).toMatch(/--image/)
    }
    const png = join(dir, 'a.png')
    writeFileSync(png, pngBytes(100))
    const noPrompt = await dsh(['run', '--image', png, '--resume', 'x', '--root', root, '--base-url', 'http://127.0.0.1:9/v1'])
    expect(noPrompt.code).toBe(2)
    expect(noPrompt.stderr).toMatch(/--image needs a prompt/)
    const badApi = await dsh(['run', '--api', 'completions', 'hi', '--root', root, '--base-url', 'http://127.0.0.1:9/v1'])
    expect(badApi.code).toBe(2)
    expect(badApi.stderr).toMatch(/--api must be one of chat, responses/)
    expect(() => readdirSync(root)).toThrow()
  })

  it('an image over the attachment cap is CLI_USAGE before the root is touched (no empty session is left)', async () => {
    // A sparse file: its size is past the cap without writing the bytes.
    const big = join(dir, 'big.png')
    writeFileSync(big, pngBytes(64))
    truncateSync(big, ATTACHMENT_MAX_BYTES + 1)
    const result = await dsh(['run', '--image', big, 'look', '--root', root, '--base-url', 'http://127.0.0.1:9/v1', '--json'])
    expect(result.code, result.stdout + result.stderr).toBe(2)
    expect(JSON.parse(result.stdout).error).toEqual({
      code: 'CLI_USAGE',
      message: `--image '${big}' is ${ATTACHMENT_MAX_BYTES + 1} bytes, over the attachment cap of ${ATTACHMENT_MAX_BYTES} bytes (20 MiB); attach a smaller file.`,
    })
    expect(() => readdirSync(root)).toThrow()
  })
})
