import { execFileSync } from 'node:child_process'
import {
  chmodSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { createHost, derivedPaths } from '@dsh/host'
import { PAGE_MAX_LIMIT, SEARCH_PAGE_MAX_LIMIT } from '@dsh/protocol/limits'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { cleanEnv, dshRun } from './support/dsh-process.js'
import { rootWithOneSession } from './support/root.js'
import { cli } from './support/run.js'

// The CLI in this process over real roots: hostile ids, labels and text are
// printed escaped; --json stays exact; reads never write.

const ESC_ID = 'evil\x1b[2J\nforged  row  2026-01-01\u202eabc'
const LABEL = 'helper\x1b]0;pwned\x07\u202e'
const TEXT = 'clear \x1b[2J the screen and \u202ereverse'

let dir: string
let root: string
let childId: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'dsh-cli-unit-'))
  root = join(dir, 'root')
  const host = await createHost({ root })
  try {
    const parent = host.sessions.create({ id: ESC_ID, cwd: dir })
    parent.append('user/message', { text: TEXT })
    const child = host.subagents.spawn(parent, { id: `${ESC_ID}.child`, mode: 'continuable', label: LABEL, context: 'fresh', prompt: 'go' })
    childId = child.id
    await child.done
    await host.sessions.flush(parent)
  } finally {
    await host.dispose()
  }
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** No raw control or bidi character reaches the terminal; the only newlines are the CLI's own. */
function expectSafe(text: string): void {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: asserting their absence
  expect(text.replace(/\n/g, '')).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/)
}

function listTree(path: string): string[] {
  return readdirSync(path, { recursive: true, encoding: 'utf8' }).sort()
}

describe('printed text escapes controls and bidi characters', () => {
  it('sessions: the hostile id is one escaped row; --json is exact', async () => {
    const text = await cli(['sessions', '--root', root])
    expect(text.code, text.stderr).toBe(0)
    expectSafe(text.stdout)
    expect(text.stdout).toContain('evil\\x1b[2J\\x0aforged  row  2026-01-01\\u202eabc')
    // header, rule, two sessions, the count line
    expect(text.stdout.trimEnd().split('\n')).toHaveLength(5)
    expect(text.stdout).not.toMatch(/^forged/m)
    const json = JSON.parse((await cli(['sessions', '--root', root, '--json'])).stdout) as { sessions: { header: { id: string } }[] }
    expect(json.sessions.map((r) => r.header.id).sort()).toEqual([ESC_ID, childId].sort())
  })

  it('show: id, type and event text are escaped', async () => {
    const text = await cli(['show', ESC_ID, '--root', root])
    expect(text.code, text.stderr).toBe(0)
    expectSafe(text.stdout)
    expect(text.stdout).toContain('session evil\\x1b[2J\\x0aforged')
    expect(text.stdout).toContain('"text":"clear \\u001b[2J the screen') // JSON's own escape of ESC in the data summary
    expect(text.stdout).toContain('\\u202ereverse')
    const json = JSON.parse((await cli(['show', ESC_ID, '--root', root, '--json'])).stdout) as { events: { data: { text?: string } }[] }
    expect(json.events[0]?.data.text).toBe(TEXT)
  })

  it('agents: the id and the label are escaped, rows are not forged', async () => {
    const text = await cli(['agents', ESC_ID, '--root', root])
    expect(text.code, text.stderr).toBe(0)
    expectSafe(text.stdout)
    expect(text.stdout.trimEnd().split('\n')).toHaveLength(1)
    expect(text.stdout).toContain('\\x0aforged')
    expect(text.stdout).toContain('\\u202e')
    const json = JSON.parse((await cli(['agents', ESC_ID, '--root', root, '--json'])).stdout) as { rows: { id: string; label?: string }[] }
    expect(json.rows).toEqual([expect.objectContaining({ id: childId, label: LABEL })])
  })

  it('search: ids and snippets are escaped', async () => {
    for (const args of [
      ['search', 'screen', '--events'],
      ['search', 'screen'],
    ]) {
      const text = await cli([...args, '--root', root])
      expect(text.code, text.stderr).toBe(0)
      expectSafe(text.stdout)
      expect(text.stdout).toContain('evil\\x1b[2J\\x0aforged')
    }
  })

  it('verify: ids are escaped', async () => {
    const text = await cli(['verify', '--root', root])
    expect(text.code, text.stderr).toBe(0)
    expectSafe(text.stdout)
    expect(text.stdout).toContain('evil\\x1b[2J\\x0aforged')
    expect(text.stdout.trimEnd().split('\n')).toHaveLength(7) // header, rule, two logs, the summary, index and cache
    expect(text.stdout).toMatch(/^query index: quick_check ok/m)
    const json = JSON.parse((await cli(['verify', '--root', root, '--json'])).stdout)
    expect(json.derived).toMatchObject({ index: { status: 'ok' }, projectionCache: { status: 'ok' } })
  })

  it('verify: a damaged index and cache are reported as damaged, warned about once each on stderr, escaped, without a stack', async () => {
    const hostileRoot = join(dir, 'verify\x1b[2J\u202e')
    await rootWithOneSession(hostileRoot, 'x')
    const paths = derivedPaths(hostileRoot)
    for (const file of [paths.index, paths.projectionCache]) {
      for (const suffix of ['-wal', '-shm']) rmSync(file + suffix, { force: true })
      writeFileSync(realpathSync(file), Buffer.alloc(8192, 0x5a))
    }
    for (const json of [false, true]) {
      const result = await cli(['verify', '--root', hostileRoot, ...(json ? ['--json'] : [])])
      expect(result.code, result.stderr).toBe(0)
      expectSafe(result.stderr)
      expect(result.stderr).not.toMatch(/^\s+at /m)
      const warnings = result.stderr.trimEnd().split('\n')
      expect(warnings).toEqual([
        expect.stringMatching(/^dsh: warning: the projection cache at .*verify\\x1b\[2J\\u202e.* cannot be opened/),
        expect.stringMatching(/^dsh: warning: the session query index at .*verify\\x1b\[2J\\u202e.* cannot be read/),
      ])
      if (json) {
        expect(JSON.parse(result.stdout).derived).toMatchObject({ index: { status: 'damaged' }, projectionCache: { status: 'damaged' } })
      } else {
        expectSafe(result.stdout)
        expect(result.stdout).toMatch(/^query index: failed quick_check /m)
        expect(result.stdout).toMatch(/^projection cache: failed quick_check /m)
      }
    }
  })

  it('error messages are escaped too', async () => {
    const text = await cli(['show', 'no\x1b[2Jsuch', '--root', root])
    expect(text.code).toBe(1)
    expectSafe(text.stderr)
    expect(text.stderr).toContain('SESSION_QUERY_NOT_FOUND')
  })
})

describe('show --context, agents, sessions --cwd', () => {
  it('show --context checks --limit and --before as show does (CLI_USAGE) and keeps the last N messages with --limit', async () => {
    for (const bad of [['--limit', 'abc'], ['--limit', '0'], ['--limit=-1'], ['--before', 'x'], ['--before', '1']]) {
      const result = await cli(['show', ESC_ID, '--context', ...bad, '--root', root, '--json'])
      expect([result.code, JSON.parse(result.stdout).error.code], bad.join(' ')).toEqual([2, 'CLI_USAGE'])
    }
    const full = await cli(['show', ESC_ID, '--context', '--root', root])
    expect(full.code, full.stderr).toBe(0)
    const lines = full.stdout.trimEnd().split('\n').slice(2)
    expect(lines.length).toBeGreaterThan(1)
    const last = await cli(['show', ESC_ID, '--context', '--limit', '1', '--root', root])
    expect(last.code, last.stderr).toBe(0)
    expect(last.stdout.trimEnd().split('\n').slice(2)).toEqual(lines.slice(-1))
    expect(last.stdout).toContain(`${lines.length} message(s)`)
    expect(last.stdout).toContain('the last 1 shown')
    const json = JSON.parse((await cli(['show', ESC_ID, '--context', '--limit', '1', '--root', root, '--json'])).stdout)
    const fullJson = JSON.parse((await cli(['show', ESC_ID, '--context', '--root', root, '--json'])).stdout)
    expect(json.messages).toEqual(fullJson.messages.slice(-1))
  })

  it('agents of an unknown parent is SUBAGENT_NOT_FOUND (exit 1), as stats; a parent without children still lists none', async () => {
    for (const command of ['agents', 'stats']) {
      const result = await cli([command, 'no-such-parent', '--root', root, '--json'])
      expect([command, result.code, JSON.parse(result.stdout).error.code]).toEqual([command, 1, 'SUBAGENT_NOT_FOUND'])
    }
    const descendants = await cli(['agents', 'no-such-parent', '--descendants', '--root', root])
    expect(descendants.stderr).toContain('(SUBAGENT_NOT_FOUND)')
    const childless = await cli(['agents', childId, '--root', root])
    expect(childless.code, childless.stderr).toBe(0)
    expect(childless.stdout).toBe('(no subagents)\n')
  })

  it('sessions --cwd matches the recorded directory given relative, as ., or with a trailing slash', async () => {
    const ids = async (cwd: string): Promise<string[]> => {
      const result = await cli(['sessions', '--root', root, '--cwd', cwd, '--json'])
      expect(result.code, result.stderr).toBe(0)
      return (JSON.parse(result.stdout).sessions as { header: { id: string } }[]).map((r) => r.header.id).sort()
    }
    // The parent was made with cwd `dir`; its child inherits it.
    const both = [ESC_ID, childId].sort()
    expect(await ids(dir)).toEqual(both)
    for (const spelling of [`${dir}/`, relative(process.cwd(), dir), `${relative(process.cwd(), dir)}/`, join(dir, 'root', '..')])
      expect(await ids(spelling), spelling).toEqual(both)
    const here = join(dir, 'here')
    const host = await createHost({ root: here })
    try {
      await host.sessions.flush(host.sessions.create({ id: 'in-cwd', cwd: process.cwd() }))
    } finally {
      await host.dispose()
    }
    const dot = await cli(['sessions', '--root', here, '--cwd', '.', '--json'])
    expect(JSON.parse(dot.stdout).sessions.map((r: { header: { id: string } }) => r.header.id)).toEqual(['in-cwd'])
  })
})

describe('reads never write', () => {
  it('every read command refuses a directory that is not a dsh root with CLI_ROOT_INVALID and creates no file', async () => {
    const plain = join(dir, 'not-a-root')
    mkdirSync(plain)
    writeFileSync(join(plain, 'notes.txt'), 'hello')
    const before = listTree(plain)
    for (const args of [['verify'], ['sessions'], ['show', 'x'], ['agents', 'x'], ['search', 'x'], ['reindex'], ['serve']]) {
      const result = await cli([...args, '--root', plain, '--json'])
      expect(result.code, args.join(' ')).toBe(1)
      expect(JSON.parse(result.stdout).error.code, args.join(' ')).toBe('CLI_ROOT_INVALID')
    }
    expect(listTree(plain)).toEqual(before)
    const missing = await cli(['sessions', '--root', join(dir, 'missing')])
    expect(missing.stderr).toMatch(/no session root .*Pass --root DIR.*\(CLI_ROOT_INVALID\)/)
  })

  it('a root without derived files stays without them after sessions, show, agents and verify', async () => {
    const bare = join(dir, 'bare')
    const host = await createHost({ root: bare, query: 'memory', projectionCache: false })
    const session = host.sessions.create({ id: 'only' })
    session.append('user/message', { text: 'hi' })
    await host.sessions.flush(session)
    await host.dispose()
    const before = listTree(bare)
    for (const args of [['sessions'], ['show', 'only'], ['agents', 'only'], ['verify']]) {
      const result = await cli([...args, '--root', bare])
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0)
    }
    const search = await cli(['search', 'hi', '--root', bare, '--json'])
    expect(JSON.parse(search.stdout).error.code).toBe('SESSION_QUERY_INDEX_UNAVAILABLE')
    expect(listTree(bare)).toEqual(before)
  })

  it('demo --root <a file> is CLI_ROOT_INVALID, not a raw ENOTDIR', async () => {
    const file = join(dir, 'a-file')
    writeFileSync(file, 'x')
    for (const target of [file, join(file, 'below')]) {
      const result = await cli(['demo', '--root', target, '--json'])
      expect(result.code).toBe(1)
      expect(JSON.parse(result.stdout).error).toMatchObject({ code: 'CLI_ROOT_INVALID' })
    }
  })
})

describe('serve token and root permissions (failures before listening)', () => {
  it('refuses a token file that others can read, a missing one, an empty one, one of several lines, and two token sources', async () => {
    const open = join(dir, 'token-open')
    writeFileSync(open, 'serve-token-0123456789\n', { mode: 0o644 })
    chmodSync(open, 0o644)
    const empty = join(dir, 'token-empty')
    writeFileSync(empty, '\n', { mode: 0o600 })
    // A line break inside the token would be sent in the Authorization header, which no HTTP client does.
    const twoLines = join(dir, 'token-two-lines')
    writeFileSync(twoLines, 'serve-token-0123456789\nsecond-line\n', { mode: 0o600 })
    const crLines = join(dir, 'token-cr-lines')
    writeFileSync(crLines, '  serve-token-0123456789\r\nsecond-line\r\n', { mode: 0o600 })
    for (const [file, pattern] of [
      [open, /readable by other users \(mode 644\).*chmod 600/],
      [empty, /is empty/],
      [twoLines, /holds more than one line; it must hold the token alone, on one line/],
      [crLines, /holds more than one line/],
      [join(dir, 'no-token'), /cannot be opened \(ENOENT\)/],
    ] as const) {
      const result = await cli(['serve', '--root', root, '--token-file', file, '--json'])
      expect(result.code).toBe(1)
      const { error } = JSON.parse(result.stdout)
      expect(error.code).toBe('CLI_TOKEN_INVALID')
      expect(error.message).toMatch(pattern)
    }
    const both = await cli(['serve', '--root', root, '--token-file', empty, '--token', 'x', '--json'])
    expect(JSON.parse(both.stdout).error.code).toBe('CLI_USAGE')
  })

  it('refuses a FIFO token file without opening it (an open would wait for a writer forever)', async () => {
    const fifo = join(dir, 'token-fifo')
    execFileSync('mkfifo', ['-m', '600', fifo])
    // Its own process, so an open that blocks cannot block this worker; a writer opened and closed here
    // afterwards releases a reader stuck in open (and finds none when the file was never opened).
    onTestFinished(() => {
      try {
        closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK))
      } catch {
        // ENXIO: no reader has it open.
      }
    })
    const result = await dshRun(['serve', '--root', root, '--token-file', fifo, '--json'], cleanEnv({ DSH_TOKEN: '' }))
    expect(result.code, result.stderr).toBe(1)
    expect(JSON.parse(result.stdout).error).toMatchObject({
      code: 'CLI_TOKEN_INVALID',
      message: expect.stringMatching(/is not a regular file/),
    })
  })

  it('verify warns when group or others can read the root', async () => {
    chmodSync(root, 0o755)
    try {
      const result = await cli(['verify', '--root', root])
      expect(result.stderr).toMatch(/warning: the session root .* is readable by other users \(mode 755\)/)
    } finally {
      chmodSync(root, 0o700)
    }
    expect((await cli(['verify', '--root', root])).stderr).toBe('')
  })
})

describe('parsing and help', () => {
  it('--help lists every command; a command --help lists its options; unknown options are CLI_USAGE', async () => {
    const help = await cli(['--help'])
    expect(help.code).toBe(0)
    for (const name of ['demo', 'sessions', 'show', 'agents', 'search', 'verify', 'reindex', 'serve'])
      expect(help.stdout).toMatch(new RegExp(`^  ${name} `, 'm'))
    expect((await cli([])).code).toBe(2)
    const serve = await cli(['serve', '--help'])
    expect(serve.stdout).toContain('--token-file FILE')
    const bad = await cli(['sessions', '--bogus', '--json'])
    expect(bad.code).toBe(2)
    expect(JSON.parse(bad.stdout).error.code).toBe('CLI_USAGE')
    // A parse error is one line whose sentences each end with one full stop, then the hint.
    for (const args of [
      ['sessions', '--bogus'],
      ['show', 'x', '--before', '-1'],
      ['sessions', '--limit'],
    ]) {
      const { message } = JSON.parse((await cli([...args, '--json'])).stdout).error as { message: string }
      expect(message, args.join(' ')).not.toMatch(/\.\.|\n/)
      expect(message, args.join(' ')).toMatch(/[^.]\. Run 'dsh \w+ --help' for its options\.$/)
    }
    // A port past 65535 is a usage error before anything is opened.
    const port = await cli(['serve', '--port', '70000', '--json', '--root', join(root, 'never')])
    expect([port.code, JSON.parse(port.stdout).error.code, existsSync(join(root, 'never'))]).toEqual([2, 'CLI_USAGE', false])
    const noCommand = await cli(['--json'])
    expect(noCommand.code).toBe(2)
    expect(JSON.parse(noCommand.stdout).error).toMatchObject({ code: 'CLI_USAGE', message: expect.stringContaining("'dsh --help'") })
    for (const limit of [['--limit=-1'], ['--limit', '-1'], ['--limit', '0'], ['--limit', 'x']]) {
      for (const command of [['sessions'], ['show', ESC_ID], ['search', 'screen']]) {
        const result = await cli([...command, ...limit, '--root', root, '--json'])
        expect([result.code, JSON.parse(result.stdout).error.code], [...command, ...limit].join(' ')).toEqual([2, 'CLI_USAGE'])
      }
    }
    const unknown = await cli(['--root', root, 'bogus'])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('CLI_UNKNOWN_COMMAND')
  })
  it("--limit past the cap of the command's backend read, or past a safe integer, is CLI_USAGE naming the range and the text as typed; the help names the caps", async () => {
    const huge = '99999999999999999999'
    for (const [command, max] of [
      [['sessions'], PAGE_MAX_LIMIT],
      [['show', ESC_ID], PAGE_MAX_LIMIT],
      [['show', ESC_ID, '--context'], PAGE_MAX_LIMIT],
      [['search', 'screen'], SEARCH_PAGE_MAX_LIMIT],
    ] as const) {
      for (const value of [String(max + 1), huge, `00${max + 1}`]) {
        const result = await cli([...command, '--limit', value, '--root', root, '--json'])
        expect([result.code, JSON.parse(result.stdout).error], [...command, value].join(' ')).toEqual([
          2,
          { code: 'CLI_USAGE', message: `--limit must be an integer from 1 to ${max}, got '${value}'.` },
        ])
      }
      // The cap itself is a page the backend answers (search: the root has no index, a later refusal of its own).
      const atCap = await cli([...command, '--limit', String(max), '--root', root, '--json'])
      expect(atCap.code === 0 || JSON.parse(atCap.stdout).error.code !== 'CLI_USAGE', atCap.stdout).toBe(true)
      const help = await cli([command[0], '--help'])
      expect(help.stdout).toMatch(new RegExp(`--limit N +at most N .*\\(1 to ${max}\\)`))
    }
    const text = await cli(['sessions', '--limit', huge, '--root', root])
    expect(text.stderr).toBe(`dsh: --limit must be an integer from 1 to ${PAGE_MAX_LIMIT}, got '${huge}'. (CLI_USAGE)\n`)
  })
})

describe('warnings from the host', () => {
  it('go to stderr escaped, one line each (terminalLogger)', async () => {
    const { terminalLogger } = await import('../src/host-access.js')
    const lines: string[] = []
    const write = (text: string): boolean => {
      lines.push(text)
      return true
    }
    const io = { out: process.stdout, err: { write } as unknown as NodeJS.WritableStream, env: {} }
    terminalLogger(io).warn('dsh: the index at /x\x1b[2J is damaged', new Error('bad\nline'))
    terminalLogger(io).error('failed \u202e', 'plain')
    expect(lines.join('')).toBe('dsh: warning: the index at /x\\x1b[2J is damaged: bad\\x0aline\ndsh: failed \\u202e: plain\n')
  })

  it('a damaged index under a hostile path is reported escaped while sessions still answers', async () => {
    const hostileRoot = join(dir, 'root\x1b[2J\u202e')
    await rootWithOneSession(hostileRoot, 'x')
    const indexFile = derivedPaths(hostileRoot).index
    for (const suffix of ['-wal', '-shm']) rmSync(indexFile + suffix, { force: true })
    writeFileSync(indexFile, Buffer.alloc(8192, 0x5a))
    const result = await cli(['sessions', '--root', hostileRoot, '--json'])
    expect(result.code, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout).sessions.map((r: { header: { id: string } }) => r.header.id)).toEqual(['one'])
    expectSafe(result.stderr)
    expect(result.stderr).toContain('root\\x1b[2J\\u202e')
  })
})
