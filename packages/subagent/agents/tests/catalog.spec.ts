import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'
import { AgentDefinitionError, agentDefinitions, agentDirectories, MAX_DEFINITION_BYTES } from '../src/index.js'

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** A root and a project directory, each with an (empty) `.dsh/agents/`. */
function dirs(): { root: string; project: string; rootAgents: string; projectAgents: string; outside: string } {
  const temp = tempDir('dsh-agent-defs-')
  cleanups.push(temp.cleanup)
  const root = join(temp.dir, 'root')
  const project = join(temp.dir, 'project')
  const outside = join(temp.dir, 'outside')
  for (const dir of [join(root, '.dsh', 'agents'), join(project, '.dsh', 'agents'), outside]) mkdirSync(dir, { recursive: true })
  return { root, project, rootAgents: join(root, '.dsh', 'agents'), projectAgents: join(project, '.dsh', 'agents'), outside }
}

function definition(name: string, description: string, extra = ''): string {
  return `---\nname: ${name}\ndescription: ${description}\n${extra}---\nInstructions of ${description}.\n`
}

async function rejection(promise: Promise<unknown>): Promise<AgentDefinitionError> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(AgentDefinitionError)
    return error as AgentDefinitionError
  }
  throw new Error('it resolved')
}

describe('agentDefinitions', () => {
  it('reads <root>/.dsh/agents and <project>/.dsh/agents; the project wins a name both have', async () => {
    const d = dirs()
    writeFileSync(join(d.rootAgents, 'reviewer.md'), definition('reviewer', 'root reviewer', 'model: m-root\n'))
    writeFileSync(join(d.rootAgents, 'scout.md'), definition('scout', 'root scout'))
    writeFileSync(join(d.projectAgents, 'reviewer.md'), definition('reviewer', 'project reviewer', 'tools: [grep]\n'))
    writeFileSync(join(d.projectAgents, 'notes.txt'), 'not a definition')
    writeFileSync(join(d.projectAgents, '.draft.md'), 'hidden files are not definitions')
    const defs = agentDefinitions({ root: d.root, project: d.project })
    expect(defs.directories).toEqual([
      { scope: 'root', dir: d.rootAgents },
      { scope: 'project', dir: d.projectAgents },
    ])

    const reviewer = await defs.get('reviewer')
    expect(reviewer).toMatchObject({ description: 'project reviewer', tools: ['grep'], scope: 'project' })
    expect(reviewer.model).toBeUndefined()
    expect((await defs.get('scout')).scope).toBe('root')

    expect(await defs.list()).toEqual([
      {
        name: 'reviewer',
        description: 'project reviewer',
        tools: ['grep'],
        scope: 'project',
        file: join(d.projectAgents, 'reviewer.md'),
        overrides: join(d.rootAgents, 'reviewer.md'),
      },
      { name: 'scout', description: 'root scout', scope: 'root', file: join(d.rootAgents, 'scout.md') },
    ])
  })

  it('missing directories hold no definitions; an unknown name is AGENT_NOT_FOUND naming where it looked', async () => {
    const defs = agentDefinitions({ root: '/nonexistent-dsh-root', project: '/nonexistent-dsh-project' })
    expect(await defs.list()).toEqual([])
    const error = await rejection(defs.get('ghost'))
    expect(error.code).toBe('AGENT_NOT_FOUND')
    expect(error.message).toContain('/nonexistent-dsh-project/.dsh/agents')
    expect((await rejection(agentDefinitions({}).get('ghost'))).message).toContain('no agent directories are configured')
  })

  it('a name that could leave the directory is AGENT_NAME_INVALID and nothing is read', async () => {
    const d = dirs()
    writeFileSync(join(d.root, 'secret.md'), definition('secret', 'outside'))
    const defs = agentDefinitions({ root: d.root, project: d.project })
    for (const name of ['../secret', '../../root/secret', '/etc/passwd', 'a/b', 'Reviewer', '', '.hidden', 'x'.repeat(65)]) {
      expect((await rejection(defs.get(name))).code).toBe('AGENT_NAME_INVALID')
    }
  })

  it('a symbolic link is followed only inside its directory', async () => {
    const d = dirs()
    writeFileSync(join(d.outside, 'leak.md'), definition('leak', 'outside'))
    symlinkSync(join(d.outside, 'leak.md'), join(d.projectAgents, 'leak.md'))
    writeFileSync(join(d.projectAgents, 'base.md'), definition('alias', 'inside'))
    symlinkSync(join(d.projectAgents, 'base.md'), join(d.projectAgents, 'alias.md'))
    const defs = agentDefinitions({ project: d.project })
    const leak = await rejection(defs.get('leak'))
    expect(leak.code).toBe('AGENT_DEFINITION_UNREADABLE')
    expect(leak.message).toContain('resolves outside its agents directory')
    expect((await defs.get('alias')).description).toBe('inside')
  })

  it('a bad file fails the listing with its file and line, and counts every other bad file', async () => {
    const d = dirs()
    writeFileSync(join(d.rootAgents, 'good.md'), definition('good', 'fine'))
    writeFileSync(join(d.rootAgents, 'typo.md'), definition('typo', 'typo', 'modle: x\n'))
    writeFileSync(join(d.projectAgents, 'yaml.md'), '---\nname: yaml\ndescription: [a\n---\nbody\n')
    const defs = agentDefinitions({ root: d.root, project: d.project })
    const error = await rejection(defs.list())
    expect(error.code).toBe('AGENT_DEFINITION_INVALID')
    expect(error.message).toMatch(new RegExp(`^${join(d.rootAgents, 'typo.md')}:4: unknown key 'modle'`))
    expect(error.message).toContain('and 1 more invalid definition file')
    expect(error.details?.problems).toHaveLength(2)
    // The good file alone still resolves by name: only the file asked for is read.
    expect((await defs.get('good')).description).toBe('fine')
  })

  it('a file over the size limit, a directory named like a definition and an unreadable file are typed errors', async () => {
    const d = dirs()
    writeFileSync(join(d.rootAgents, 'big.md'), definition('big', 'big') + 'x'.repeat(MAX_DEFINITION_BYTES))
    mkdirSync(join(d.rootAgents, 'dir.md'))
    const defs = agentDefinitions({ root: d.root })
    expect(await rejection(defs.get('big'))).toMatchObject({ code: 'AGENT_DEFINITION_INVALID', details: { line: 1 } })
    expect((await rejection(defs.get('dir'))).code).toBe('AGENT_DEFINITION_UNREADABLE')
    if (process.getuid?.() !== 0) {
      writeFileSync(join(d.rootAgents, 'locked.md'), definition('locked', 'locked'))
      chmodSync(join(d.rootAgents, 'locked.md'), 0o000)
      expect(await rejection(defs.get('locked'))).toMatchObject({ code: 'AGENT_DEFINITION_UNREADABLE', details: { errno: 'EACCES' } })
    }
  })

  it('getAll validates every named definition before it resolves', async () => {
    const d = dirs()
    writeFileSync(join(d.rootAgents, 'a.md'), definition('a', 'first'))
    writeFileSync(join(d.rootAgents, 'b.md'), definition('b', 'second', 'budgets:\n  maxTokens: many\n'))
    const defs = agentDefinitions({ root: d.root })
    expect((await defs.getAll(['a'])).map((x) => x.name)).toEqual(['a'])
    expect(await rejection(defs.getAll(['a', 'b']))).toMatchObject({ code: 'AGENT_DEFINITION_INVALID', details: { line: 5 } })
    expect((await rejection(defs.getAll(['a', '../b']))).code).toBe('AGENT_NAME_INVALID')
  })

  it('directories must be absolute; one directory given as both root and project counts once, as the project', () => {
    expect(() => agentDirectories({ root: 'relative' })).toThrow(expect.objectContaining({ code: 'AGENT_DEFINITION_OPTIONS_INVALID' }))
    expect(agentDirectories({ root: '/same', project: '/same/' })).toEqual([{ scope: 'project', dir: '/same/.dsh/agents' }])
  })

  it('an aborted signal rejects with CANCELLED before a read', async () => {
    const d = dirs()
    const defs = agentDefinitions({ root: d.root })
    const aborted = AbortSignal.abort()
    await expect(defs.list(aborted)).rejects.toMatchObject({ code: 'CANCELLED' })
    await expect(defs.get('x', aborted)).rejects.toMatchObject({ code: 'CANCELLED' })
  })
})
