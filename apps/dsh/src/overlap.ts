import { realpathSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, relative, sep } from 'node:path'

/**
 * Where a dsh root and a v0 root must not meet: `import` never writes the v0
 * root it reads, `export` never writes v0 directories into the dsh root it
 * reads, and each direction's output must be readable by the other.
 */

/**
 * `path` with symlinks resolved: the real path of its longest existing
 * ancestor, then the components that do not exist yet. Two paths that reach
 * the same directory through a link compare equal.
 */
function realPath(path: string): string {
  const missing: string[] = []
  let at = path
  for (;;) {
    try {
      return join(realpathSync(at), ...missing.reverse())
    } catch {
      const parent = dirname(at)
      if (parent === at) return path
      missing.push(basename(at))
      at = parent
    }
  }
}

/** True when one directory is the other or inside it. */
function overlaps(a: string, b: string): boolean {
  const inside = (child: string, parent: string): boolean => {
    const rel = relative(parent, child)
    return rel === '' || !(rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel))
  }
  return inside(a, b) || inside(b, a)
}

/**
 * Whether two absolute directories overlap (one is the other or inside it),
 * compared as given and through symlinks: `undefined` when they do not;
 * else their real paths and whether a link is on the way, to name in a message.
 */
export function overlapOf(
  a: string,
  b: string,
): { readonly realA: string; readonly realB: string; readonly viaLinks: boolean } | undefined {
  const [realA, realB] = [realPath(a), realPath(b)]
  if (!overlaps(a, b) && !overlaps(realA, realB)) return undefined
  return { realA, realB, viaLinks: realA !== a || realB !== b }
}
