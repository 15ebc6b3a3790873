/* A minimal stand-in for lua.c (which the lua-src crate does not ship): runs one script with
 * the standard libraries open and the remaining arguments in the global table `arg` (arg[0] is
 * the script, arg[1]... its arguments), like `lua script.lua args...`. */
#include <stdio.h>

#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s script.lua [args...]\n", argv[0]);
    return 2;
  }
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create state: not enough memory\n", argv[0]);
    return 1;
  }
  luaL_openlibs(L);
  lua_createtable(L, argc - 2, 1);
  for (int i = 1; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  lua_setglobal(L, "arg");
  int status = luaL_dofile(L, argv[1]);
  if (status != LUA_OK) {
    fprintf(stderr, "%s: %s\n", argv[0], lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_close(L);
  return 0;
}
