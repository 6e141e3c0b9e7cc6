// ESLint for the extension's TypeScript (run by `jlpm lint`, from `bash scripts/dev.sh test`).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'build-test/', 'node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      eqeqeq: ['error', 'smart'],
      'no-restricted-properties': [
        'error',
        { property: 'innerHTML', message: 'build DOM with textContent (docs/RECORDS.md)' },
        { property: 'outerHTML', message: 'build DOM with textContent (docs/RECORDS.md)' }
      ],
      '@typescript-eslint/no-non-null-assertion': 'off'
    }
  }
);
