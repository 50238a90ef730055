// Preloaded with --import: records whether the process touched
// process.stderr (the getter makes the stream) and writes "untouched", or
// "touched" and the stack of the first touch, to the file named by
// DSH_STDERR_PROBE at exit.
import { writeFileSync } from 'node:fs'

const descriptor = Object.getOwnPropertyDescriptor(process, 'stderr')
let touched
Object.defineProperty(process, 'stderr', {
  configurable: true,
  enumerable: descriptor.enumerable,
  get() {
    touched ??= new Error('stderr touched').stack
    return descriptor.get.call(process)
  },
})
process.on('exit', () => writeFileSync(process.env.DSH_STDERR_PROBE, touched === undefined ? 'untouched' : `touched ${touched}`))
