// The floor of issue 30's 25-component latency without Python: K processes of PROGRAM
// started at once with posix_spawn, then waited for; median wall ms of N tries.
//   gcc -O2 -o /tmp/floor bench/latency/floor.c && /tmp/floor PROGRAM K N
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
extern char **environ;
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){int k=atoi(argv[2]),n=atoi(argv[3]);double w[1000];
 for(int r=0;r<n;r++){double t=now();pid_t p[256];char*av[]={argv[1],NULL};
  for(int i=0;i<k;i++) posix_spawn(&p[i],argv[1],NULL,NULL,av,environ);
  for(int i=0;i<k;i++) waitpid(p[i],NULL,0);
  w[r]=now()-t;}
 qsort(w,n,sizeof(double),cmp);printf("%s k=%d: median %.1f ms, min %.1f, max %.1f (n=%d)\n",argv[1],k,w[n/2],w[0],w[n-1],n);}
